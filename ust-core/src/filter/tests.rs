//! Tests of the filter tree, its checks and its evaluation.

use super::*;
use crate::event::{FieldDesc, IntegerType};
use crate::Level;
use std::borrow::Cow;

struct Ctx;
impl ContextSource for Ctx {
    fn int(&self, c: ContextType) -> i128 {
        match c {
            ContextType::Vtid => 42,
            _ => 7,
        }
    }
    fn procname(&self) -> &[u8] {
        b"myapp"
    }
}

fn desc() -> EventDesc {
    EventDesc {
        provider: Cow::Borrowed("p"),
        name: Cow::Borrowed("e"),
        level: Level::Info,
        fields: Cow::Owned(vec![
            FieldDesc { name: Cow::Borrowed("n"), ty: FieldType::Integer(IntegerType::I32) },
            FieldDesc { name: Cow::Borrowed("s"), ty: FieldType::String },
            FieldDesc { name: Cow::Borrowed("f"), ty: FieldType::Float { exp_dig: 11, mant_dig: 53 } },
            FieldDesc { name: Cow::Borrowed("u"), ty: FieldType::Integer(IntegerType::U64) },
            FieldDesc { name: Cow::Borrowed("raw"), ty: FieldType::Array { elem: IntegerType::U8, len: 2 } },
        ]),
        location: Cow::Borrowed(""),
    }
}

fn payload(n: i32, s: &str, f: f64, u: u64) -> Vec<u8> {
    let mut p = n.to_le_bytes().to_vec();
    p.extend_from_slice(s.as_bytes());
    p.push(0);
    p.extend_from_slice(&f.to_le_bytes());
    p.extend_from_slice(&u.to_le_bytes());
    p.extend_from_slice(&[1, 2]);
    p
}

fn cmp(op: CmpOp, a: Operand, b: Operand) -> Expr {
    Expr::Cmp(op, a, b)
}

#[test]
fn fields_are_read_from_the_payload() {
    let d = desc();
    let p = payload(-5, "hello", 2.5, u64::MAX);
    assert!(matches!(field_value(&d, &p, 0), Some(Value::Int(-5))));
    assert!(matches!(field_value(&d, &p, 1), Some(Value::Str(b"hello"))));
    assert!(matches!(field_value(&d, &p, 2), Some(Value::Float(v)) if v == 2.5));
    assert!(matches!(field_value(&d, &p, 3), Some(Value::Int(v)) if v == u64::MAX as i128));
    assert!(field_value(&d, &p, 4).is_none());
    assert!(field_value(&d, &p[..6], 2).is_none(), "cut payload");
}

#[test]
fn every_operator() {
    let d = desc();
    let p = payload(-5, "hello", 2.5, u64::MAX);
    let t = |e: Expr| {
        validate(&e, &d).unwrap();
        eval(&e, &d, &p, &Ctx)
    };
    let n = || Operand::Field(0);
    assert!(t(cmp(CmpOp::Eq, n(), Operand::Int(-5))));
    assert!(t(cmp(CmpOp::Ne, n(), Operand::Int(5))));
    assert!(t(cmp(CmpOp::Lt, n(), Operand::Int(0))));
    assert!(t(cmp(CmpOp::Le, n(), Operand::Int(-5))));
    assert!(!t(cmp(CmpOp::Gt, n(), Operand::Int(-5))));
    assert!(t(cmp(CmpOp::Ge, n(), Operand::Int(-5))));
    assert!(t(cmp(CmpOp::Gt, Operand::Field(3), Operand::Int(i64::MAX))), "u64 above i64");
    assert!(t(cmp(CmpOp::Gt, Operand::Field(2), Operand::Int(2))), "float vs int");
    assert!(t(cmp(CmpOp::Lt, Operand::Field(2), Operand::Float(2.75))));
    assert!(t(cmp(CmpOp::Eq, Operand::Field(1), Operand::Str("hello".into()))));
    assert!(t(cmp(CmpOp::Eq, Operand::Str("he*".into()), Operand::Field(1))), "glob on the left");
    assert!(t(cmp(CmpOp::Ne, Operand::Field(1), Operand::Str("x*".into()))));
    assert!(t(cmp(CmpOp::Eq, Operand::Context(ContextType::Vtid), Operand::Int(42))));
    assert!(t(cmp(CmpOp::Eq, Operand::Context(ContextType::Procname), Operand::Str("my*".into()))));
    let yes = || Box::new(cmp(CmpOp::Eq, n(), Operand::Int(-5)));
    let no = || Box::new(cmp(CmpOp::Eq, n(), Operand::Int(6)));
    assert!(t(Expr::Or(no(), yes())));
    assert!(!t(Expr::Or(no(), no())));
    assert!(t(Expr::And(yes(), yes())));
    assert!(!t(Expr::And(yes(), no())));
    assert!(t(Expr::Not(no())));
    assert!(t(Expr::Truthy(n())));
    assert!(!t(Expr::Truthy(Operand::Int(0))));
}

#[test]
fn patterns() {
    assert!(pattern_match(b"*", b""));
    assert!(pattern_match(b"a*c", b"abbbc"));
    assert!(pattern_match(b"*b*", b"abc"));
    assert!(!pattern_match(b"a*d", b"abc"));
    assert!(pattern_match(b"a\\*", b"a*"));
    assert!(!pattern_match(b"a\\*", b"ab"));
    assert!(pattern_match(b"a\\\\", b"a\\"));
    assert!(pattern_match(b"abc", b"abc") && !pattern_match(b"abc", b"abcd"));
}

#[test]
fn validation_rejects_what_cannot_run() {
    let d = desc();
    assert_eq!(validate(&Expr::Truthy(Operand::Named("n".into())), &d), Err(FilterError::Unresolved("n".into())));
    assert_eq!(validate(&Expr::Truthy(Operand::Field(9)), &d), Err(FilterError::FieldIndex(9)));
    assert!(matches!(validate(&Expr::Truthy(Operand::Field(4)), &d), Err(FilterError::Uncomparable(_))));
    assert!(matches!(validate(&cmp(CmpOp::Lt, Operand::Field(1), Operand::Str("a".into())), &d), Err(FilterError::Mismatch(..))));
    assert!(matches!(validate(&cmp(CmpOp::Eq, Operand::Field(0), Operand::Str("a".into())), &d), Err(FilterError::Mismatch(..))));
    assert_eq!(validate(&Expr::Truthy(Operand::Field(1)), &d), Err(FilterError::StringTruth));
    let mut deep = Expr::Truthy(Operand::Int(1));
    for _ in 0..40 {
        deep = Expr::Not(Box::new(deep));
    }
    assert_eq!(validate(&deep, &d), Err(FilterError::TooDeep));
    let mut wide = Expr::Truthy(Operand::Int(1));
    for _ in 0..20 {
        wide = Expr::Or(Box::new(wide.clone()), Box::new(wide));
        if check_shape(&wide).is_err() {
            break;
        }
    }
    assert!(check_shape(&wide).is_err());
    assert_eq!(validate(&Expr::Truthy(Operand::Str("x".repeat(2000))), &d), Err(FilterError::LongString));
}

#[test]
fn resolution_names_fields_or_gives_up() {
    let d = desc();
    let e = cmp(CmpOp::Eq, Operand::Named("s".into()), Operand::Str("a".into()));
    assert_eq!(resolve(&e, &d), Some(cmp(CmpOp::Eq, Operand::Field(1), Operand::Str("a".into()))));
    assert_eq!(resolve(&cmp(CmpOp::Eq, Operand::Named("missing".into()), Operand::Int(1)), &d), None);
    assert_eq!(resolve(&cmp(CmpOp::Eq, Operand::Named("s".into()), Operand::Int(1)), &d), None, "type mismatch");
}

fn tptest() -> (EventDesc, Vec<u8>) {
    let d = EventDesc {
        provider: Cow::Borrowed("tp"),
        name: Cow::Borrowed("tptest"),
        level: Level::Info,
        fields: Cow::Owned(vec![
            FieldDesc { name: Cow::Borrowed("i"), ty: FieldType::Integer(IntegerType::I32) },
            FieldDesc { name: Cow::Borrowed("arr"), ty: FieldType::Array { elem: IntegerType::I64, len: 3 } },
            FieldDesc { name: Cow::Borrowed("seq"), ty: FieldType::Sequence { length: IntegerType::U32, elem: IntegerType::U16, text: false } },
            FieldDesc { name: Cow::Borrowed("s"), ty: FieldType::String },
        ]),
        location: Cow::Borrowed(""),
    };
    let mut p = 6i32.to_le_bytes().to_vec();
    for v in [1i64, -2, 3] {
        p.extend_from_slice(&v.to_le_bytes());
    }
    p.extend_from_slice(&2u32.to_le_bytes());
    p.extend_from_slice(&[7, 0, 9, 0]);
    p.extend_from_slice(b"x*y\0");
    (d, p)
}

#[test]
fn integer_operators_elements_and_values_of_comparisons() {
    let (d, p) = tptest();
    let t = |e: Expr| {
        validate(&e, &d).unwrap_or_else(|err| panic!("{e:?}: {err}"));
        eval(&e, &d, &p, &Ctx)
    };
    let b = Box::new;
    let int = |v: i64| b(Expr::Truthy(Operand::Int(v)));
    let i = || b(Expr::Truthy(Operand::Field(0)));
    let bits = |op, x, y| b(Expr::Bits(op, x, y));
    let eq = |x, y| Expr::Compare(CmpOp::Eq, x, y);
    assert!(t(eq(bits(BitOp::And, i(), int(4)), int(4))));
    assert!(t(eq(bits(BitOp::Or, i(), int(1)), int(7))));
    assert!(t(eq(bits(BitOp::Xor, i(), int(2)), int(4))));
    assert!(t(eq(bits(BitOp::Shl, int(1), int(63)), int(i64::MIN))), "shifts work on the 64 bits");
    assert!(t(Expr::Compare(CmpOp::Lt, bits(BitOp::Shl, int(1), int(63)), int(0))), "comparisons are signed");
    assert!(t(eq(bits(BitOp::Shr, b(Expr::BitNot(int(0))), int(4)), int(0x0fff_ffff_ffff_ffff))), "logical shift right");
    assert!(!t(Expr::Not(b(eq(bits(BitOp::Shl, int(1), int(64)), int(0))))), "a shift out of range makes the whole filter false");
    assert!(!t(Expr::Not(b(eq(bits(BitOp::Shl, int(1), int(-1)), int(0))))));
    assert!(t(eq(b(Expr::Neg(i())), int(-6))) && t(eq(b(Expr::BitNot(i())), int(-7))));
    let ge = |x, y| b(Expr::Compare(CmpOp::Ge, x, y));
    assert!(t(*ge(int(1), ge(int(1), ge(int(1), int(1))))), "1 >= (1 >= (1 >= 1))");
    assert!(t(Expr::Cmp(CmpOp::Eq, Operand::Elem(1, 1), Operand::Int(-2))));
    assert!(t(Expr::Cmp(CmpOp::Eq, Operand::Elem(2, 1), Operand::Int(9))));
    assert!(!t(Expr::Not(b(Expr::Cmp(CmpOp::Eq, Operand::Elem(2, 2), Operand::Int(0))))), "past a sequence's end");
    assert!(!t(Expr::Not(b(Expr::Cmp(CmpOp::Eq, Operand::Elem(1, 3), Operand::Int(0))))), "past an array's end");
    let many = |n: usize| (0..n).map(|k| Expr::Cmp(CmpOp::Ne, Operand::Field(0), Operand::Int(k as i64 + 100))).collect::<Vec<_>>();
    assert!(t(Expr::All(many(500))), "a chain of 500 terms is one level deep");
    assert!(!t(Expr::Any(many(0))) && t(Expr::All(many(0))));
    assert!(matches!(validate(&bits(BitOp::And, b(Expr::Truthy(Operand::Field(3))), int(1)), &d), Err(FilterError::StringTruth)));
    assert!(matches!(validate(&bits(BitOp::And, b(Expr::Truthy(Operand::Float(1.0))), int(1)), &d), Err(FilterError::FloatBits("&"))));
    assert!(matches!(validate(&Expr::Truthy(Operand::Elem(3, 0)), &d), Err(FilterError::Uncomparable(_))), "a string has no elements");
}

#[test]
fn literals_compare_as_lttng_compares_them() {
    let (d, p) = tptest();
    let lit = |s: &str| Operand::Str(s.into());
    let t = |a: &str, b: &str| {
        let e = Expr::Cmp(CmpOp::Eq, lit(a), lit(b));
        validate(&e, &d).map(|()| eval(&e, &d, &p, &Ctx))
    };
    assert_eq!(glob_class(b"abc"), GlobClass::Plain);
    assert_eq!(glob_class(b"a\\*"), GlobClass::Plain);
    assert_eq!(glob_class(b"ab**"), GlobClass::StarEnd);
    assert_eq!(glob_class(b"*ab"), GlobClass::Full);
    assert_eq!(t("abcccd", "*ccd"), Ok(true));
    assert_eq!(t("*ccd", "abcccd"), Ok(true), "either side");
    assert_eq!(t("test", "t*"), Ok(true));
    assert_eq!(t("a\\*r", "a*"), Ok(true));
    assert_eq!(t("\\*", "*"), Ok(true));
    assert_eq!(t("salut*", "salut vous*"), Ok(true), "two star-at-end patterns compare by prefix");
    assert_eq!(t("salut*", "salon*"), Ok(false));
    assert_eq!(t("a\\*b", "a*b"), Ok(true), "an escaped star is a plain star, matched by a pattern's `*`");
    assert_eq!(t("hello*world", "yes*man"), Err(FilterError::TwoGlobs));
    assert_eq!(t("hello*world", "yesman*"), Err(FilterError::TwoGlobs));
    assert!(t("bLah", "bLaH") == Ok(false) && t("bLah", "bLah") == Ok(true));
    let s = Expr::Cmp(CmpOp::Eq, Operand::Field(3), lit("x\\*y"));
    assert!(eval(&s, &d, &p, &Ctx), "a field against an escaped star");
}

#[test]
fn a_blob_is_compared_by_its_bytes_never_as_a_whole() {
    let d = EventDesc {
        provider: Cow::Borrowed("tp"),
        name: Cow::Borrowed("blob"),
        level: Level::Info,
        fields: Cow::Owned(vec![
            FieldDesc { name: Cow::Borrowed("image"), ty: FieldType::Blob { media_type: Cow::Borrowed("image/png") } },
            FieldDesc { name: Cow::Borrowed("n"), ty: FieldType::Integer(IntegerType::U8) },
        ]),
        location: Cow::Borrowed(""),
    };
    let mut p = 3u64.to_le_bytes().to_vec();
    p.extend_from_slice(&[0x89, b'P', b'N', 7]);
    let whole = Expr::Cmp(CmpOp::Eq, Operand::Named("image".into()), Operand::Str("x".into()));
    assert_eq!(whole_blob_field(&whole, &d).map(|f| &*f.name), Some("image"));
    let nested = Expr::All(vec![Expr::Truthy(Operand::Named("n".into())), Expr::Not(Box::new(Expr::Truthy(Operand::Named("image".into()))))]);
    assert_eq!(whole_blob_field(&nested, &d).map(|f| &*f.name), Some("image"), "found below other operators");
    assert_eq!(resolve(&whole, &d), None, "never evaluated");
    let byte = Expr::Cmp(CmpOp::Eq, Operand::NamedElem("image".into(), 0), Operand::Int(0x89));
    assert_eq!(whole_blob_field(&byte, &d), None);
    let r = resolve(&byte, &d).expect("one byte of a blob is an integer");
    assert!(eval(&r, &d, &p, &Ctx));
    let after = Expr::Cmp(CmpOp::Eq, Operand::Field(1), Operand::Int(7));
    assert!(eval(&after, &d, &p, &Ctx), "the field after a blob is found past its bytes");
    let past = Expr::Cmp(CmpOp::Eq, Operand::Elem(0, 3), Operand::Int(7));
    assert!(!eval(&past, &d, &p, &Ctx), "past the blob's end");
}
