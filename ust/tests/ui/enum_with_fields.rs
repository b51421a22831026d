// #[derive(ust::Enum)] accepts fieldless enums only.
#[derive(ust::Enum)]
enum Shape {
    Point,
    Circle(f64),
}

fn main() {}
