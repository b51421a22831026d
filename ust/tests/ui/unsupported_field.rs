// A field of a type that cannot be recorded is a compile error that names the field.
fn main() {
    let v: Vec<u8> = vec![1, 2];
    ust::tracepoint!(myapp, bad, ok: u32 = 1, items: Vec<u8> = v);
}
