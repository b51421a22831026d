//! Procedural macros of [ust](https://docs.rs/ust): `tracepoint!`, `#[provider]` and
//! `#[derive(Enum)]`. Use them through the `ust` crate, which re-exports them and provides
//! the runtime their expansions call; the expansions name `::ust::...` paths.
//!
//! Every tracepoint expands to a `static` call site (`ust::Site`) that holds
//! the event description (provider, name, level, fields with their CTF types, all borrowed
//! static data) and an atomic channel mask, registered in a link-time collection
//! (`linkme::distributed_slice`), then to
//!
//! ```text
//! if SITE.mask.load(Relaxed) != 0 { ip = call_site_ip!(); evaluate arguments; encode them into the ring buffer }
//! ```
//!
//! so a disabled tracepoint costs one relaxed load and a not-taken branch and does not
//! evaluate its arguments. With `ust`'s cargo feature `sdt` (chosen through
//! `ust::__private::sdt_select!`, since a procedural macro cannot see another crate's
//! features) the site is also a SystemTap SDT probe whose semaphore joins the test:
//!
//! ```text
//! if SITE.mask | SEMAPHORE != 0 { evaluate arguments; SDT probe (registers); if mask != 0 { record } }
//! else { SDT probe (constant operands) }
//! ```

#![deny(missing_docs)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![deny(unsafe_op_in_unsafe_fn)]

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::{format_ident, quote, quote_spanned};
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::visit_mut::VisitMut;
use syn::{Error, Expr, Ident, Token, Type};

/// Most fields that are also SDT probe arguments (`ust::__private::SDT_MAX_ARGS`, as
/// `<sys/sdt.h>`).
const SDT_MAX_ARGS: usize = 12;

/// One `name: Type = expr` argument of a tracepoint.
struct FieldArg {
    name: Ident,
    ty: Type,
    expr: Expr,
}

impl Parse for FieldArg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![:]>()?;
        let ty: Type = input.parse()?;
        input.parse::<Token![=]>()?;
        let expr: Expr = input.parse()?;
        Ok(FieldArg { name, ty, expr })
    }
}

/// `provider, event [, level = L] [, field: Type = expr]* [,]`
struct TracepointInput {
    provider: Ident,
    event: Ident,
    level: Option<syn::Path>,
    fields: Vec<FieldArg>,
}

impl Parse for TracepointInput {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let provider: Ident = input.parse()?;
        input.parse::<Token![,]>()?;
        let event: Ident = input.parse()?;
        let mut level = None;
        let mut fields = Vec::new();
        while !input.is_empty() {
            input.parse::<Token![,]>()?;
            if input.is_empty() {
                break;
            }
            if level.is_none() && fields.is_empty() && input.peek(Ident) && input.peek2(Token![=]) {
                let kw: Ident = input.parse()?;
                if kw != "level" {
                    return Err(Error::new(kw.span(), "expected `level = Level` or a field `name: Type = expr`"));
                }
                input.parse::<Token![=]>()?;
                level = Some(input.parse()?);
                continue;
            }
            fields.push(input.parse()?);
        }
        Ok(TracepointInput { provider, event, level, fields })
    }
}

/// Replaces elided lifetimes (`&T`, `'_`) by `'static`, so a field type written as in a
/// `let` can name the CTF type in a `static`.
struct StaticLifetimes;

impl VisitMut for StaticLifetimes {
    fn visit_type_reference_mut(&mut self, r: &mut syn::TypeReference) {
        match &r.lifetime {
            None => r.lifetime = Some(syn::Lifetime::new("'static", r.and_token.span)),
            Some(l) if l.ident == "_" => r.lifetime = Some(syn::Lifetime::new("'static", l.span())),
            _ => {}
        }
        syn::visit_mut::visit_type_reference_mut(self, r);
    }
    fn visit_lifetime_mut(&mut self, l: &mut syn::Lifetime) {
        if l.ident == "_" {
            *l = syn::Lifetime::new("'static", l.span());
        }
    }
}

fn static_type(ty: &Type) -> Type {
    let mut t = ty.clone();
    StaticLifetimes.visit_type_mut(&mut t);
    t
}

/// Whether `ty` is a path whose last segment is `Blob` (`ust::Blob<M>`, `Blob<'_, M>`).
fn is_blob(ty: &Type) -> bool {
    matches!(ty, Type::Path(p) if p.qself.is_none() && p.path.segments.last().is_some_and(|s| s.ident == "Blob"))
}

fn unraw(id: &Ident) -> String {
    let s = id.to_string();
    s.strip_prefix("r#").map(str::to_string).unwrap_or(s)
}

fn level_tokens(level: &Option<syn::Path>) -> TokenStream2 {
    match level {
        None => quote!(::ust::Level::DebugLine),
        Some(p) if p.segments.len() == 1 && p.leading_colon.is_none() => {
            let id = &p.segments[0].ident;
            quote_spanned!(id.span()=> ::ust::Level::#id)
        }
        Some(p) => quote!(#p),
    }
}

/// The expansion shared by `tracepoint!` and `#[provider]` functions.
fn expand_site(provider: &Ident, event: &Ident, level: &Option<syn::Path>, fields: &[FieldArg]) -> syn::Result<TokenStream2> {
    let mut seen: Vec<String> = Vec::new();
    for f in fields {
        let n = unraw(&f.name);
        if seen.contains(&n) {
            return Err(Error::new(f.name.span(), format!("duplicate tracepoint field `{n}`")));
        }
        seen.push(n);
    }
    let provider_s = unraw(provider);
    let event_s = unraw(event);
    let level = level_tokens(level);

    let mut descs = Vec::new();
    let mut markers = Vec::new();
    let mut lets = Vec::new();
    let mut lens = Vec::new();
    let mut encodes = Vec::new();
    let mut len_idents = Vec::new();
    let mut fixed_encodes = Vec::new();
    for (i, f) in fields.iter().enumerate() {
        let name_s = unraw(&f.name);
        let sty = static_type(&f.ty);
        let ty = &f.ty;
        let expr = &f.expr;
        let v = format_ident!("__ust_v{}", i);
        let l = format_ident!("__ust_l{}", i);
        // A type named after the field: every use of the field's type goes through
        // `FieldNamed<__ust_fields::name>`, so an unsupported type is reported as
        // "tracepoint field `name` ...".
        let marker = f.name.clone();
        markers.push(quote! { pub struct #marker {} });
        let named = quote_spanned! {ty.span()=> ::ust::__private::FieldNamed<__ust_fields::#marker> };
        descs.push(quote_spanned! {ty.span()=>
            ::ust::__private::FieldDesc {
                name: ::ust::__private::Cow::Borrowed(#name_s),
                ty: <#sty as #named>::TYPE,
            }
        });
        // A `Blob<M>` field takes `&bytes` as well as a `Blob`: its value goes through
        // `FieldInit` (types named otherwise keep the plain `let`, and its coercions).
        if is_blob(ty) {
            lets.push(quote_spanned! {expr.span()=> let #v: #ty = <#ty as ::ust::__private::FieldInit<_>>::field_init(#expr); });
        } else {
            lets.push(quote_spanned! {expr.span()=> let #v: #ty = #expr; });
        }
        lens.push(quote_spanned! {ty.span()=> let #l: usize = <#ty as #named>::encoded_len(&#v); });
        encodes.push(quote_spanned! {ty.span()=>
            let (__ust_head, __ust_out) = __ust_out.split_at_mut(#l);
            <#ty as #named>::encode(&#v, __ust_head);
        });
        // The same field at its constant offset, when every field is fixed-size (a
        // constant-length slice of the payload array: no length check is left).
        let idx = syn::Index::from(i);
        fixed_encodes.push(quote_spanned! {ty.span()=>
            {
                const __UST_AT: usize = __UST_OFF[#idx];
                const __UST_END: usize = match __UST_FIELDS[#idx].ty.fixed_size() {
                    Some(n) if __UST_FIXED.is_some() => __UST_AT + n,
                    _ => __UST_AT,
                };
                <#ty as #named>::encode(&#v, &mut __ust_a[__UST_AT..__UST_END]);
            }
        });
        len_idents.push(l);
    }
    // SDT operands (`ust::__private::sdt_probe!`): per argument its size as a `const`
    // operand, then its value in a register (or a register holding 0 on the path where
    // nothing is evaluated).
    let nsdt = fields.len().min(SDT_MAX_ARGS);
    let sdt_reg_t = vec!["{}@{}"; nsdt].join(" ");
    let sdt_zero_t = vec!["{}@{__ust_zero}"; nsdt].join(" ");
    let mut sdt_reg_ops = Vec::new();
    let mut sdt_zero_ops = Vec::new();
    for (i, f) in fields.iter().take(nsdt).enumerate() {
        let sty = static_type(&f.ty);
        let ty = &f.ty;
        let marker = &f.name;
        let v = format_ident!("__ust_v{}", i);
        let named = quote_spanned! {ty.span()=> ::ust::__private::FieldNamed<__ust_fields::#marker> };
        let size = quote_spanned! {ty.span()=> const <#sty as #named>::SDT_SIZE };
        sdt_reg_ops.push(quote_spanned! {ty.span()=> #size, in(reg) <#ty as #named>::sdt_arg(&#v) });
        sdt_zero_ops.push(size);
    }
    // The idle location's operands: one register holding 0 for every argument (perf
    // reads no constants, and wants the same layout at every location of a probe).
    let zero_op = if nsdt > 0 { quote!(, __ust_zero = in(reg) 0u64) } else { quote!() };
    let nfields = fields.len();
    let sum = if len_idents.is_empty() { quote!(0usize) } else { quote!(0usize #(+ #len_idents)*) };
    let markers = if markers.is_empty() {
        quote!()
    } else {
        quote! {
            #[allow(non_camel_case_types, dead_code)]
            mod __ust_fields { #(#markers)* }
        }
    };
    // The recording of the event, once the values are evaluated (`__ust_v*`) and
    // `__ust_ip` is known.
    let record = quote! {
        // A constant condition: only one of the two calls is compiled in.
        const __UST_IS_FIXED: bool = __UST_FIXED.is_some();
        if __UST_IS_FIXED {
            // The closure captures the values only (the lengths are constants),
            // by value: fixed-size fields are small, and `emit` receives them in
            // registers rather than their addresses.
            ::ust::__private::emit_fixed(&__UST_SITE, __ust_ip, __UST_LEN, move |__ust_out: &mut [u8]| {
                // `emit` hands over exactly `__UST_LEN` bytes.
                if let Ok(__ust_a) = <&mut [u8; __UST_LEN]>::try_from(__ust_out) {
                    #(#fixed_encodes)*
                    let _ = __ust_a;
                }
            });
        } else {
            #(#lens)*
            ::ust::__private::emit(&__UST_SITE, __ust_ip, #sum, |__ust_out: &mut [u8]| {
                #(#encodes)*
                let _ = __ust_out;
            });
        }
    };
    Ok(quote! {
        {
            // A `const` (not the static's initializer) so the slice is promoted to static
            // memory even though `FieldDesc` has drop glue.
            const __UST_FIELDS: &[::ust::__private::FieldDesc] = &[#(#descs),*];
            static __UST_SITE: ::ust::__private::Site = ::ust::__private::Site::new(::ust::__private::EventDesc {
                provider: ::ust::__private::Cow::Borrowed(#provider_s),
                name: ::ust::__private::Cow::Borrowed(#event_s),
                level: #level,
                fields: ::ust::__private::Cow::Borrowed(__UST_FIELDS),
                location: ::ust::__private::Cow::Borrowed(::core::concat!(::core::file!(), ":", ::core::line!())),
            });
            #[::ust::__private::linkme::distributed_slice(::ust::__private::SITES)]
            #[linkme(crate = ::ust::__private::linkme)]
            static __UST_SITE_REF: &::ust::__private::Site = &__UST_SITE;
            #markers
            // Every field fixed-size: the field offsets and the payload size, at compile
            // time (else `None`, and the lengths are computed from the values).
            const __UST_FIXED: ::core::option::Option<([usize; #nfields], usize)> = ::ust::__private::fixed_layout::<#nfields>(__UST_FIELDS);
            const __UST_OFF: [usize; #nfields] = match __UST_FIXED { Some((o, _)) => o, None => [0; #nfields] };
            const __UST_LEN: usize = match __UST_FIXED { Some((_, n)) => n, None => 0 };
            // With `ust`'s feature `sdt` the site is also a SystemTap SDT probe (see
            // `ust::__private::sdt_probe!`): it fires whether or not ust records, and the
            // arguments are evaluated only when ust records or a consumer set the semaphore.
            ::ust::__private::sdt_select! {
                {
                    ::ust::__private::sdt_semaphore!(__UST_SEMA);
                    // One test of both (an OR, not a second branch).
                    let __ust_mask = __UST_SITE.mask();
                    if __ust_mask | __UST_SEMA.get() != 0 {
                        #(#lets)*
                        ::ust::__private::sdt_probe!(__UST_SEMA, #provider_s, #event_s, #sdt_reg_t #(, #sdt_reg_ops)*);
                        if __ust_mask != 0 {
                            let __ust_ip: u64 = ::ust::call_site_ip!();
                            #record
                        }
                    } else {
                        ::ust::__private::sdt_probe!(__UST_SEMA, #provider_s, #event_s, #sdt_zero_t #(, #sdt_zero_ops)* #zero_op);
                    }
                }
                {
                    if __UST_SITE.is_enabled() {
                        // The call site's address, for the `ip` context: one instruction, on the
                        // enabled branch only.
                        let __ust_ip: u64 = ::ust::call_site_ip!();
                        #(#lets)*
                        #record
                    }
                }
            }
        }
    })
}

/// Declares and fires a tracepoint: `tracepoint!(provider, event, [level = L,] field: Type =
/// expr, ...)`. See the `ust` crate documentation.
#[proc_macro]
pub fn tracepoint(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as TracepointInput);
    match expand_site(&input.provider, &input.event, &input.level, &input.fields) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

/// Arguments of `#[tracepoint(...)]` inside a provider module: `level = L` (optional).
struct TracepointAttr {
    level: Option<syn::Path>,
}

impl Parse for TracepointAttr {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let mut level = None;
        let items = Punctuated::<syn::MetaNameValue, Token![,]>::parse_terminated(input)?;
        for item in items {
            if !item.path.is_ident("level") {
                return Err(Error::new(item.path.span(), "expected `level = Level`"));
            }
            match item.value {
                Expr::Path(p) => level = Some(p.path),
                other => return Err(Error::new(other.span(), "expected a level name, e.g. `level = Info`")),
            }
        }
        Ok(TracepointAttr { level })
    }
}

/// Turns every `#[tracepoint]` function of a module into a tracepoint named
/// `<module>:<function>`; see the `ust` crate documentation.
#[proc_macro_attribute]
pub fn provider(attr: TokenStream, item: TokenStream) -> TokenStream {
    match provider_impl(attr.into(), syn::parse_macro_input!(item as syn::ItemMod)) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn provider_impl(attr: TokenStream2, mut module: syn::ItemMod) -> syn::Result<TokenStream2> {
    if !attr.is_empty() {
        return Err(Error::new(attr.span(), "#[ust::provider] takes no arguments; the module name is the provider"));
    }
    let provider = module.ident.clone();
    let Some((_, items)) = module.content.as_mut() else {
        return Err(Error::new(module.ident.span(), "#[ust::provider] needs an inline module: `mod name { ... }`"));
    };
    for item in items.iter_mut() {
        let syn::Item::Fn(f) = item else { continue };
        let Some(pos) = f.attrs.iter().position(|a| a.path().is_ident("tracepoint")) else { continue };
        let attr = f.attrs.remove(pos);
        let args = match &attr.meta {
            syn::Meta::Path(_) => TracepointAttr { level: None },
            _ => attr.parse_args::<TracepointAttr>()?,
        };
        if !f.block.stmts.is_empty() {
            return Err(Error::new(f.block.span(), "a tracepoint function's body must be empty: `{}`"));
        }
        if !matches!(f.sig.output, syn::ReturnType::Default) || f.sig.asyncness.is_some() || f.sig.constness.is_some() {
            return Err(Error::new(f.sig.span(), "a tracepoint function is a plain `fn` returning nothing"));
        }
        let mut fields = Vec::new();
        for input in &f.sig.inputs {
            let syn::FnArg::Typed(pt) = input else {
                return Err(Error::new(input.span(), "a tracepoint function takes no `self`"));
            };
            let syn::Pat::Ident(pi) = &*pt.pat else {
                return Err(Error::new(pt.pat.span(), "tracepoint parameters must be plain names"));
            };
            let name = pi.ident.clone();
            fields.push(FieldArg { name: name.clone(), ty: (*pt.ty).clone(), expr: syn::parse_quote!(#name) });
        }
        let body = expand_site(&provider, &f.sig.ident, &args.level, &fields)?;
        *f.block = syn::parse_quote!({ #body });
        f.attrs.push(syn::parse_quote!(#[inline]));
    }
    Ok(quote!(#module))
}

/// `#[derive(ust::Enum)]`: a fieldless enum becomes a CTF enumeration field type.
#[proc_macro_derive(Enum)]
pub fn derive_enum(input: TokenStream) -> TokenStream {
    match derive_enum_impl(syn::parse_macro_input!(input as syn::DeriveInput)) {
        Ok(t) => t.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

fn derive_enum_impl(input: syn::DeriveInput) -> syn::Result<TokenStream2> {
    let syn::Data::Enum(data) = &input.data else {
        return Err(Error::new(input.ident.span(), "#[derive(ust::Enum)] works on fieldless enums only"));
    };
    if !input.generics.params.is_empty() {
        return Err(Error::new(input.generics.span(), "#[derive(ust::Enum)] does not support generic enums"));
    }
    if data.variants.is_empty() {
        return Err(Error::new(input.ident.span(), "#[derive(ust::Enum)] needs at least one variant"));
    }
    for v in &data.variants {
        if !matches!(v.fields, syn::Fields::Unit) {
            return Err(Error::new(v.span(), "#[derive(ust::Enum)]: variants must have no fields"));
        }
    }
    // The container: the integer `#[repr]`, else 32 bits (signed when a value is negative).
    let mut repr: Option<Ident> = None;
    for a in &input.attrs {
        if a.path().is_ident("repr") {
            a.parse_nested_meta(|m| {
                if let Some(id) = m.path.get_ident() {
                    if matches!(id.to_string().as_str(), "u8" | "u16" | "u32" | "u64" | "i8" | "i16" | "i32" | "i64" | "usize" | "isize") {
                        repr = Some(id.clone());
                    }
                }
                Ok(())
            })?;
        }
    }
    let name = &input.ident;
    let name_s = name.to_string();
    let labels: Vec<String> = data.variants.iter().map(|v| unraw(&v.ident)).collect();
    let idents: Vec<&Ident> = data.variants.iter().map(|v| &v.ident).collect();
    let container = match &repr {
        Some(r) => {
            let (bits, signed): (u8, bool) = match r.to_string().as_str() {
                "u8" => (8, false),
                "u16" => (16, false),
                "u32" => (32, false),
                "u64" | "usize" => (64, false),
                "i8" => (8, true),
                "i16" => (16, true),
                "i32" => (32, true),
                _ => (64, true),
            };
            quote!(::ust::__private::IntegerType::new(#bits, #signed, 10))
        }
        None => quote!(::ust::__private::default_enum_container(&[#(#name::#idents as i64),*])),
    };
    Ok(quote! {
        // SAFETY: `encoded_len` is the container's size, and `encode` copies exactly that
        // many bytes of the discriminant into the slice of that length: cannot panic.
        unsafe impl ::ust::Field for #name {
            const TYPE: ::ust::__private::FieldType = ::ust::__private::FieldType::Enum {
                container: #container,
                name: ::ust::__private::Cow::Borrowed(#name_s),
                mappings: ::ust::__private::Cow::Borrowed(&[
                    #(::ust::__private::EnumMapping {
                        label: ::ust::__private::Cow::Borrowed(#labels),
                        value: #name::#idents as i64,
                    }),*
                ]),
            };
            #[inline(always)]
            fn encoded_len(&self) -> usize {
                ::ust::__private::enum_size(&<Self as ::ust::Field>::TYPE)
            }
            #[inline(always)]
            fn encode(&self, out: &mut [u8]) {
                // Two's complement little-endian: the low bytes of the i64 are the value in
                // any narrower container, signed or not.
                let v: i64 = match self {
                    #(#name::#idents => #name::#idents as i64,)*
                };
                let n = out.len();
                out.copy_from_slice(&v.to_le_bytes()[..n]);
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(tokens: TokenStream2) -> syn::Result<String> {
        let input: TracepointInput = syn::parse2(tokens)?;
        expand_site(&input.provider, &input.event, &input.level, &input.fields).map(|t| t.to_string())
    }

    #[test]
    fn parses_level_and_fields() {
        let i: TracepointInput = syn::parse2(quote!(app, ev, level = Warning, a: u32 = 1, b: &str = &s,)).unwrap();
        assert_eq!(i.provider, "app");
        assert_eq!(i.event, "ev");
        assert!(i.level.unwrap().is_ident("Warning"));
        assert_eq!(i.fields.len(), 2);
        let i: TracepointInput = syn::parse2(quote!(app, ev)).unwrap();
        assert!(i.level.is_none() && i.fields.is_empty());
    }

    #[test]
    fn rejects_bad_input() {
        assert!(expand(quote!(app, ev, a: u32 = 1, a: u8 = 2)).unwrap_err().to_string().contains("duplicate"));
        assert!(expand(quote!(app, ev, lvl = Info)).is_err());
        assert!(expand(quote!(app)).is_err());
        assert!(expand(quote!(app, ev, a = 1)).is_err());
    }

    #[test]
    fn elided_lifetimes_become_static_in_the_description() {
        let t: Type = syn::parse2(quote!(&[u8])).unwrap();
        assert_eq!(quote!(#t).to_string(), "& [u8]");
        let s = static_type(&t);
        assert_eq!(quote!(#s).to_string(), "& 'static [u8]");
        let t: Type = syn::parse2(quote!(Wrapper<'_>)).unwrap();
        let s = static_type(&t);
        assert_eq!(quote!(#s).to_string(), "Wrapper < 'static >");
    }

    #[test]
    fn expansion_registers_the_site_and_tests_the_mask_first() {
        let out = expand(quote!(app, ev, x: u64 = f())).unwrap();
        assert!(out.contains("distributed_slice"), "{out}");
        // Two expansions, `ust::__private::sdt_select!` keeps one: with the `sdt` feature
        // (the mask and the semaphore tested first), and without it.
        let (sdt, plain) = out.split_at(out.find("if __UST_SITE . is_enabled ()").unwrap());
        let check = sdt.find("__ust_mask | __UST_SEMA . get () != 0").unwrap();
        let eval = sdt.find("f ()").unwrap();
        assert!(check < eval, "arguments evaluated before the test: {sdt}");
        assert!(sdt.find("sdt_probe").unwrap() > eval && sdt.matches("sdt_probe").count() == 2, "{sdt}");
        let eval = plain.find("f ()").unwrap();
        assert!(eval > 0 && !plain.contains("SEMA"), "{plain}");
    }

    #[test]
    fn provider_functions_must_be_empty() {
        let m: syn::ItemMod = syn::parse2(quote!(
            mod p {
                #[tracepoint]
                fn f(a: u8) {
                    work();
                }
            }
        ))
        .unwrap();
        assert!(provider_impl(TokenStream2::new(), m).is_err());
        let m: syn::ItemMod = syn::parse2(quote!(
            mod p {
                #[tracepoint(level = Info)]
                pub fn f(a: u8) {}
                fn other() {}
            }
        ))
        .unwrap();
        let out = provider_impl(TokenStream2::new(), m).unwrap().to_string();
        assert!(out.contains("is_enabled") && out.contains("fn other"), "{out}");
    }
}
