//! Order statistics shared by the report's views (system calls, spans).

/// The `p`-quantile (0 to 1) of `sorted` (ascending): the element at rank `(n - 1) * p`,
/// rounded to the nearest; 0 when empty.
pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[cfg(test)]
mod tests {
    #[test]
    fn nearest_rank() {
        let v = [1, 3, 8];
        assert_eq!((super::percentile(&v, 0.5), super::percentile(&v, 0.9), super::percentile(&v, 0.0)), (3, 8, 1));
        assert_eq!(super::percentile(&[], 0.5), 0);
    }
}
