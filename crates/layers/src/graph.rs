//! The module graph of one crate, read with `syn`: which source file imports which.
//!
//! **Nodes** are source files (paths relative to the crate's `src/`). A file's module path is
//! found the way rustc finds it: from the crate root through `mod x;` declarations (`x.rs`,
//! `x/mod.rs` or `#[path = "…"]`), every `cfg` taken (all platforms and features at once).
//! Inline modules (`mod tests { … }`) belong to their file.
//!
//! **An edge** `A → B` is a path written in file A that names something in file B:
//! - every leaf of a `use` tree (`use crate::x::Y;`, `use super::{a, b::C};`, `pub use c::*;`,
//!   a `pub use` re-export included), and
//! - every path in code (types, expressions, patterns, trait bounds, and `a::b` token runs inside
//!   macro calls and attributes such as `#[error("…", crate::x::f(.0))]`), when its first
//!   segment is `crate`, `super`, `self`, a child module, or a name a module-level `use`
//!   brought in (an alias is followed: `use macos as native;` then `native::f()` names
//!   `macos.rs`).
//!
//! A path resolves to the deepest *declared module* it walks through: `crate::drm::model::X`
//! names the file of `drm::model`; `crate::Probe` names `lib.rs` (a re-export there is not
//! followed), and `super::Item` names the parent's file even when the parent only re-exports
//! `Item` from a sibling. So a child that imports through its parent's re-exports, while the
//! parent re-exports that child, is a circle: code inside a crate names items where they are
//! defined. A `mod x;` declaration is not an edge (it is the tree, not a use); visibility paths
//! (`pub(in crate::x)`), doc comments and doc links, paths inside strings, and method calls are
//! not edges. Paths that name another crate (`std::…`, `hypomnesis::…` from `hmn`) are not
//! edges. Two files that `cfg` makes one module (`#[cfg(unix)] mod imp;` beside
//! `#[cfg(not(unix))] #[path = "imp_other.rs"] mod imp;`) never import each other.
//!
//! Test code (`#[cfg(test)]` modules and files) is held to the same rule: a test lives with the
//! lowest file whose code it exercises.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The source files of one crate, keyed by their path relative to `src/`.
#[derive(Debug, Clone)]
pub struct Source {
    root: PathBuf,
    files: BTreeMap<PathBuf, String>,
}

impl Source {
    /// Every `.rs` file under `src_dir`; `root` is the crate root's file name (`lib.rs`).
    pub fn from_dir(src_dir: &Path, root: &str) -> std::io::Result<Self> {
        let mut files = BTreeMap::new();
        let mut stack = vec![PathBuf::new()];
        while let Some(rel) = stack.pop() {
            for entry in std::fs::read_dir(src_dir.join(&rel))? {
                let entry = entry?;
                let name = rel.join(entry.file_name());
                if entry.file_type()?.is_dir() {
                    stack.push(name);
                } else if name.extension().is_some_and(|e| e == "rs") {
                    files.insert(name.clone(), std::fs::read_to_string(src_dir.join(&name))?);
                }
            }
        }
        Ok(Self {
            root: PathBuf::from(root),
            files,
        })
    }

    /// The crate root's path relative to `src/` (`lib.rs`).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Every file: its path relative to `src/` and its text.
    pub fn files(&self) -> impl Iterator<Item = (&Path, &str)> {
        self.files.iter().map(|(p, t)| (p.as_path(), t.as_str()))
    }

    /// A synthetic crate (the checker's own tests): `(path, text)` pairs and the root's path.
    pub fn from_files<'a>(root: &str, files: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let files = files
            .into_iter()
            .map(|(p, t)| (PathBuf::from(p), t.to_owned()))
            .collect();
        Self {
            root: PathBuf::from(root),
            files,
        }
    }
}

/// One import: file `from` names something in file `to`, at `line` (1-based) whose text is
/// `text`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The importing file.
    pub from: PathBuf,
    /// The file the path resolves to.
    pub to: PathBuf,
    /// The line of the path in `from`.
    pub line: usize,
    /// That line's text, trimmed.
    pub text: String,
}

/// The files of a crate and every edge between them.
#[derive(Debug, Default)]
pub struct Graph {
    /// Every file reached from the crate root.
    pub files: BTreeSet<PathBuf>,
    /// Every import, in file and line order (several per pair of files).
    pub edges: Vec<Edge>,
    /// What could not be read: a file that does not parse, a declared module with no file, a
    /// file under `src/` that no module declaration reaches.
    pub errors: Vec<String>,
}

type ModPath = Vec<String>;

#[derive(Debug, Default)]
struct Module {
    /// The file(s) this module's items are written in (two where `cfg` picks one of two).
    files: Vec<PathBuf>,
    children: BTreeSet<String>,
    /// Module-level `use` leaves: the name brought in and the path(s) it names (two where
    /// `cfg` picks one of two, as `use macos as native;` / `use windows as native;`).
    aliases: BTreeMap<String, Vec<Vec<String>>>,
}

struct Loader<'s> {
    source: &'s Source,
    modules: BTreeMap<ModPath, Module>,
    parsed: Vec<(PathBuf, ModPath, syn::File)>,
    loaded: BTreeSet<(ModPath, PathBuf)>,
    errors: Vec<String>,
}

/// Reads the crate from its root and returns its file graph.
pub fn build(source: &Source) -> Graph {
    let mut loader = Loader {
        source,
        modules: BTreeMap::new(),
        parsed: Vec::new(),
        loaded: BTreeSet::new(),
        errors: Vec::new(),
    };
    let root_dir = source
        .root
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    loader.modules.entry(Vec::new()).or_default();
    loader.load(Vec::new(), source.root.clone(), root_dir);

    let mut graph = Graph {
        errors: std::mem::take(&mut loader.errors),
        ..Graph::default()
    };
    for (file, module, _) in &loader.parsed {
        graph.files.insert(file.clone());
        let _ = module;
    }
    for file in source.files.keys() {
        if !graph.files.contains(file) {
            graph.errors.push(format!(
                "{}: no module declaration reaches this file",
                file.display()
            ));
        }
    }
    for (file, module, ast) in &loader.parsed {
        let text = &source.files[file];
        let mut v = EdgeVisitor {
            modules: &loader.modules,
            file,
            lines: text.lines().collect(),
            module: module.clone(),
            edges: &mut graph.edges,
        };
        v.visit_file(ast);
    }
    graph
        .edges
        .sort_by(|a, b| (&a.from, a.line, &a.to).cmp(&(&b.from, b.line, &b.to)));
    graph.edges.dedup();
    graph
}

fn ident(i: &syn::Ident) -> String {
    let s = i.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}

/// Flattens a `use` tree into (name brought in, full path, span of the leaf). A glob's "name"
/// is `*`; `self` in a group names the group's path.
fn flatten_use(
    tree: &syn::UseTree,
    prefix: &mut Vec<String>,
    out: &mut Vec<(String, Vec<String>, proc_macro2::Span)>,
) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(ident(&p.ident));
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let name = ident(&n.ident);
            if name == "self" {
                if let Some(last) = prefix.last() {
                    out.push((last.clone(), prefix.clone(), n.ident.span()));
                }
            } else {
                let mut full = prefix.clone();
                full.push(name.clone());
                out.push((name, full, n.ident.span()));
            }
        }
        syn::UseTree::Rename(r) => {
            let name = ident(&r.ident);
            let mut full = prefix.clone();
            if name != "self" {
                full.push(name);
            }
            out.push((ident(&r.rename), full, r.ident.span()));
        }
        syn::UseTree::Glob(g) => out.push(("*".into(), prefix.clone(), g.star_token.spans[0])),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

impl Loader<'_> {
    fn load(&mut self, module: ModPath, file: PathBuf, child_dir: PathBuf) {
        if !self.loaded.insert((module.clone(), file.clone())) {
            return;
        }
        let Some(text) = self.source.files.get(&file) else {
            self.errors
                .push(format!("{}: no such file", file.display()));
            return;
        };
        let ast = match syn::parse_file(text) {
            Ok(ast) => ast,
            Err(e) => {
                self.errors
                    .push(format!("{}: does not parse: {e}", file.display()));
                return;
            }
        };
        let m = self.modules.entry(module.clone()).or_default();
        if !m.files.contains(&file) {
            m.files.push(file.clone());
        }
        self.register(&module, &file, &child_dir, &ast.items);
        self.parsed.push((file, module, ast));
    }

    fn register(&mut self, module: &ModPath, file: &Path, child_dir: &Path, items: &[syn::Item]) {
        for item in items {
            match item {
                syn::Item::Mod(m) => {
                    let name = ident(&m.ident);
                    let mut child = module.clone();
                    child.push(name.clone());
                    self.modules
                        .entry(module.clone())
                        .or_default()
                        .children
                        .insert(name.clone());
                    if let Some((_, inner)) = &m.content {
                        let entry = self.modules.entry(child.clone()).or_default();
                        if !entry.files.iter().any(|f| f == file) {
                            entry.files.push(file.to_path_buf());
                        }
                        self.register(&child, file, &child_dir.join(&name), inner);
                        continue;
                    }
                    let target = if let Some(p) = path_attr(&m.attrs) {
                        file.parent().unwrap_or(Path::new("")).join(p)
                    } else {
                        let flat = child_dir.join(format!("{name}.rs"));
                        if self.source.files.contains_key(&flat) {
                            flat
                        } else {
                            child_dir.join(&name).join("mod.rs")
                        }
                    };
                    let dir = target.parent().unwrap_or(Path::new("")).to_path_buf();
                    let grand_dir = if target.file_name().is_some_and(|f| f == "mod.rs") {
                        dir
                    } else {
                        dir.join(target.file_stem().unwrap_or_default())
                    };
                    self.load(child, target, grand_dir);
                }
                syn::Item::Use(u) => {
                    let mut leaves = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut leaves);
                    let entry = self.modules.entry(module.clone()).or_default();
                    for (name, path, _) in leaves {
                        if name != "*" && name != "_" {
                            let paths = entry.aliases.entry(name).or_default();
                            if !paths.contains(&path) {
                                paths.push(path);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

struct EdgeVisitor<'a> {
    modules: &'a BTreeMap<ModPath, Module>,
    file: &'a Path,
    lines: Vec<&'a str>,
    module: ModPath,
    edges: &'a mut Vec<Edge>,
}

impl EdgeVisitor<'_> {
    fn has_child(&self, m: &[String], name: &str) -> bool {
        self.modules
            .get(m)
            .is_some_and(|m| m.children.contains(name))
    }

    /// The deepest declared module `segs` walks through, from the current module (several where
    /// its first segment is a `cfg`-alternative alias); empty for a path that does not start in
    /// this crate. A module alias (`use macos as native;`) is followed at the start of a path
    /// only; a re-export is never followed.
    fn resolve(&self, segs: &[String], depth: u8) -> Vec<ModPath> {
        let Some(first) = segs.first() else {
            return Vec::new();
        };
        let mut i = 1;
        let mut m: ModPath = match first.as_str() {
            "crate" => Vec::new(),
            "self" => self.module.clone(),
            "super" => {
                let mut m = self.module.clone();
                if m.pop().is_none() {
                    return Vec::new();
                }
                while segs.get(i).is_some_and(|s| s == "super") {
                    if m.pop().is_none() {
                        return Vec::new();
                    }
                    i += 1;
                }
                m
            }
            name if self.has_child(&self.module, name) => {
                i = 0;
                self.module.clone()
            }
            name => {
                let Some(alias) = self
                    .modules
                    .get(&self.module)
                    .and_then(|m| m.aliases.get(name))
                else {
                    return Vec::new();
                };
                if depth > 8 {
                    return Vec::new();
                }
                let mut out = Vec::new();
                for a in alias {
                    if a.first().is_some_and(|f| f == name) {
                        continue;
                    }
                    let full: Vec<String> = a.iter().chain(&segs[1..]).cloned().collect();
                    for r in self.resolve(&full, depth + 1) {
                        if !out.contains(&r) {
                            out.push(r);
                        }
                    }
                }
                return out;
            }
        };
        while let Some(s) = segs.get(i) {
            if !self.has_child(&m, s) {
                break;
            }
            m.push(s.clone());
            i += 1;
        }
        vec![m]
    }

    fn add(&mut self, segs: &[String], span: proc_macro2::Span) {
        for target in self.resolve(segs, 0) {
            self.add_target(&target, span);
        }
    }

    fn add_target(&mut self, target: &ModPath, span: proc_macro2::Span) {
        // The current module itself (or `cfg` alternatives of its file): not an edge.
        if *target == self.module {
            return;
        }
        let Some(module) = self.modules.get(target) else {
            return;
        };
        // A module written in this file (an inline module, or a `cfg` alternative of it).
        if module.files.iter().any(|f| f == self.file) {
            return;
        }
        let line = span.start().line;
        let text = self
            .lines
            .get(line.saturating_sub(1))
            .map_or(String::new(), |l| l.trim().to_owned());
        for to in &module.files {
            self.edges.push(Edge {
                from: self.file.to_path_buf(),
                to: to.clone(),
                line,
                text: text.clone(),
            });
        }
    }

    /// `a::b::c` runs of tokens inside a macro call.
    fn scan_tokens(&mut self, tokens: TokenStream) {
        let tokens: Vec<TokenTree> = tokens.into_iter().collect();
        let mut i = 0;
        while i < tokens.len() {
            match &tokens[i] {
                TokenTree::Group(g) => {
                    self.scan_tokens(g.stream());
                    i += 1;
                }
                TokenTree::Ident(id) => {
                    let span = id.span();
                    let mut segs = vec![id.to_string()];
                    i += 1;
                    while let (
                        Some(TokenTree::Punct(a)),
                        Some(TokenTree::Punct(b)),
                        Some(TokenTree::Ident(n)),
                    ) = (tokens.get(i), tokens.get(i + 1), tokens.get(i + 2))
                    {
                        if a.as_char() != ':' || b.as_char() != ':' {
                            break;
                        }
                        segs.push(n.to_string());
                        i += 3;
                    }
                    if segs.len() > 1 {
                        self.add(&segs, span);
                    }
                }
                _ => i += 1,
            }
        }
    }
}

impl<'ast> Visit<'ast> for EdgeVisitor<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if let Some((_, items)) = &m.content {
            self.module.push(ident(&m.ident));
            for item in items {
                self.visit_item(item);
            }
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut leaves = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut leaves);
        for (_, path, span) in leaves {
            self.add(&path, span);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() {
            let segs: Vec<String> = p.segments.iter().map(|s| ident(&s.ident)).collect();
            if let Some(first) = p.segments.first() {
                self.add(&segs, first.ident.span());
            }
        }
        syn::visit::visit_path(self, p);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        self.visit_path(&m.path);
        self.scan_tokens(m.tokens.clone());
    }

    fn visit_vis_restricted(&mut self, _: &'ast syn::VisRestricted) {}

    /// An attribute's tokens are code too (`#[error("…", crate::x::describe(.0))]`); a doc
    /// comment (`#[doc = …]`) is not, nor are paths inside strings.
    fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
        match &a.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("doc") => {}
            syn::Meta::List(l) => self.scan_tokens(l.tokens.clone()),
            _ => {}
        }
    }
}
