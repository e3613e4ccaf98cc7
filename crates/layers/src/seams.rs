//! Where a crate's `unsafe` code and platform `cfg`s are: the files that hold either, read
//! with `syn`, so a document's lists of them (ARCHITECTURE.md, "Platforms") can be checked
//! against the code.
//!
//! **`unsafe`**: an `unsafe { … }` block, an `unsafe fn` (free, in an `impl`, in a trait, or
//! declared in an `extern` block), an `unsafe impl`, an `unsafe trait`, an `unsafe extern`
//! block, and the keyword `unsafe` anywhere inside a macro call's tokens (whose body `syn`
//! does not parse). `#[allow(unsafe_code)]`, comments and strings are not `unsafe`.
//!
//! **A platform `cfg`**: a `#[cfg(…)]` or `#[cfg_attr(…)]` attribute (inner or outer, on any
//! item, field, statement or expression) or a `cfg!(…)` call, whose tokens name one of
//! [`PLATFORM_KEYS`]. A `cfg` inside a macro call's tokens counts too. Features, `test` and
//! `debug_assertions` are not platforms.
//!
//! **A platform-only file**: one whose `mod x;` declaration carries a platform `cfg` (not a
//! `cfg_attr`, which leaves the module in; so the file itself needs none), found as rustc
//! finds it (`x.rs`, `x/mod.rs`, or `#[path]` beside the declaring file), and every file
//! under that module's folder.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

use crate::graph::Source;

/// The `cfg` keys that name a platform.
pub const PLATFORM_KEYS: &[&str] = &[
    "unix",
    "windows",
    "target_os",
    "target_family",
    "target_env",
    "target_vendor",
    "target_arch",
];

/// The files of one crate (paths relative to its `src/`) that hold `unsafe` code or a
/// platform `cfg`, and the files that could not be parsed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Seams {
    /// Files with `unsafe` code.
    pub unsafe_code: BTreeSet<PathBuf>,
    /// Files with a platform `cfg`.
    pub platform_cfg: BTreeSet<PathBuf>,
    /// Files compiled on some platforms only: a platform `cfg` on their `mod` declaration.
    pub platform_only: BTreeSet<PathBuf>,
    /// `path: error` for each file `syn` could not parse.
    pub errors: Vec<String>,
}

/// Reads every file of `source`.
pub fn scan(source: &Source) -> Seams {
    let mut seams = Seams::default();
    let all: BTreeSet<&Path> = source.files().map(|(p, _)| p).collect();
    let mut gated: Vec<PathBuf> = Vec::new();
    for (path, text) in source.files() {
        let file = match syn::parse_file(text) {
            Ok(f) => f,
            Err(e) => {
                seams.errors.push(format!("{}: {e}", path.display()));
                continue;
            }
        };
        let mut v = Finder::default();
        v.visit_file(&file);
        if v.unsafe_code {
            seams.unsafe_code.insert(path.to_path_buf());
        }
        if v.platform_cfg {
            seams.platform_cfg.insert(path.to_path_buf());
        }
        let here = path.parent().unwrap_or(Path::new(""));
        let is_mod_rs = path == source.root() || path.file_name().is_some_and(|n| n == "mod.rs");
        let children = if is_mod_rs {
            here.to_path_buf()
        } else {
            path.with_extension("")
        };
        for (name, at) in v.gated_mods {
            match at {
                Some(at) => gated.push(here.join(at)),
                None => {
                    gated.push(children.join(format!("{name}.rs")));
                    gated.push(children.join(&name).join("mod.rs"));
                }
            }
        }
    }
    for g in &gated {
        // The file, and what its module's folder holds (`x/…` beside `x.rs`, or beside `x/mod.rs`).
        let folder = if g.file_name().is_some_and(|n| n == "mod.rs") {
            g.parent().map(Path::to_path_buf)
        } else {
            Some(g.with_extension(""))
        };
        for f in &all {
            if *f == g || folder.as_ref().is_some_and(|d| f.starts_with(d)) {
                seams.platform_only.insert(f.to_path_buf());
            }
        }
    }
    seams
}

#[derive(Default)]
struct Finder {
    unsafe_code: bool,
    platform_cfg: bool,
    /// `mod x;` declarations at the file's top level with a platform `cfg`: the name and the
    /// `#[path]`, if any.
    gated_mods: Vec<(String, Option<String>)>,
    /// Inline modules entered (their declarations resolve elsewhere; not followed).
    depth: usize,
}

impl Finder {
    /// A macro call's or attribute's tokens: `unsafe` anywhere, and `cfg(…)` / `cfg_attr(…)`
    /// groups naming a platform.
    fn tokens(&mut self, tokens: &TokenStream) {
        let trees: Vec<TokenTree> = tokens.clone().into_iter().collect();
        for (i, t) in trees.iter().enumerate() {
            match t {
                TokenTree::Ident(id) if id == "unsafe" => self.unsafe_code = true,
                TokenTree::Ident(id) if id == "cfg" || id == "cfg_attr" => {
                    if let Some(TokenTree::Group(g)) = trees.get(i + 1)
                        && names_platform(&g.stream())
                    {
                        self.platform_cfg = true;
                    }
                }
                TokenTree::Group(g) => self.tokens(&g.stream()),
                _ => {}
            }
        }
    }
}

/// Whether a `cfg` predicate's tokens name a platform key.
fn names_platform(tokens: &TokenStream) -> bool {
    tokens.clone().into_iter().any(|t| match t {
        TokenTree::Ident(id) => PLATFORM_KEYS.iter().any(|k| id == k),
        TokenTree::Group(g) => names_platform(&g.stream()),
        _ => false,
    })
}

/// `#[cfg(…)]` naming a platform: what leaves the item out elsewhere (a `cfg_attr` does not).
fn is_platform_gate(a: &syn::Attribute) -> bool {
    matches!(&a.meta, syn::Meta::List(list)
        if list.path.is_ident("cfg") && names_platform(&list.tokens))
}

/// `#[cfg(…)]` or `#[cfg_attr(…)]` naming a platform.
fn is_platform_cfg(a: &syn::Attribute) -> bool {
    matches!(&a.meta, syn::Meta::List(list)
        if (list.path.is_ident("cfg") || list.path.is_ident("cfg_attr"))
            && names_platform(&list.tokens))
}

impl<'ast> Visit<'ast> for Finder {
    fn visit_expr_unsafe(&mut self, e: &'ast syn::ExprUnsafe) {
        self.unsafe_code = true;
        syn::visit::visit_expr_unsafe(self, e);
    }

    fn visit_signature(&mut self, s: &'ast syn::Signature) {
        self.unsafe_code |= s.unsafety.is_some();
        syn::visit::visit_signature(self, s);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        self.unsafe_code |= i.unsafety.is_some();
        syn::visit::visit_item_impl(self, i);
    }

    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        self.unsafe_code |= i.unsafety.is_some();
        syn::visit::visit_item_trait(self, i);
    }

    fn visit_item_foreign_mod(&mut self, i: &'ast syn::ItemForeignMod) {
        self.unsafe_code |= i.unsafety.is_some();
        syn::visit::visit_item_foreign_mod(self, i);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if m.content.is_none() && self.depth == 0 && m.attrs.iter().any(is_platform_gate) {
            let at = m.attrs.iter().find_map(|a| match &a.meta {
                syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            });
            self.gated_mods.push((m.ident.to_string(), at));
        }
        self.depth += usize::from(m.content.is_some());
        syn::visit::visit_item_mod(self, m);
        self.depth -= usize::from(m.content.is_some());
    }

    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        self.platform_cfg |= is_platform_cfg(a);
        syn::visit::visit_attribute(self, a);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if m.path.is_ident("cfg") && names_platform(&m.tokens) {
            self.platform_cfg = true;
        }
        self.tokens(&m.tokens);
        syn::visit::visit_macro(self, m);
    }
}
