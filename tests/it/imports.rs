//! Dependencies point one way (docs/architecture.md): a module under `src/` may only name the
//! modules to its left in `sync → mime → config → log → programs → response → content → upstream → tls
//! → site → conn → ops → engine → cli`. In particular `tls` never imports `conn` (a TLS session
//! is a byte interface the connection side drives), `conn` never imports `ops` or `engine`, and
//! `ops` never imports `engine`. `cli` is the binary's (`src/main.rs`), which names the library's
//! modules as `ampd::`. Inside a module the same holds without a written order: the modules
//! under one parent (`content::serve`, `content::caches`, …) depend on each other without a
//! cycle, so each can be read and tested knowing only those below it.
//!
//! What counts as naming a module: every path the compiler would resolve, read with `syn` —
//! grouped and nested `use` trees, `use super::…` and `self::…`, paths written inline in code
//! (`crate::x::y::f()`), paths inside macro calls, and names a module re-exports (`pub use`),
//! followed to where they are defined. A module using its own parent's items (`super::Thing`
//! defined in `mod.rs`) or its own children is not a dependency between siblings.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

const ORDER: [&str; 14] = [
    "sync", "mime", "config", "log", "programs", "response", "content", "upstream", "tls", "site",
    "conn", "ops", "engine", "cli",
];

/// Where the binary's modules (`src/main.rs`, `src/cli/`) sit in the module tree: under one
/// name of their own, beside the library's.
const BINARY: &str = "cli";

/// A module as its path from the library's root (`["content", "serve"]`); the binary's modules
/// are under `BINARY`.
type Module = Vec<String>;

/// One place a module names another: the source file and the path as written.
#[derive(Clone, Debug)]
struct Reference {
    file: PathBuf,
    written: String,
}

/// A source file: the module it is and the modules it names.
struct Source {
    file: PathBuf,
    module: Module,
    in_binary: bool,
    syntax: syn::File,
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|extension| extension == "rs") {
            into.push(path);
        }
    }
}

/// The module a file under `src/` is: `content/serve.rs` → `content::serve`, `conn/mod.rs` →
/// `conn`, `lib.rs` → the root, `main.rs` → `BINARY`, `cli/serve.rs` → `BINARY::cli::serve`.
fn module_of(relative: &Path) -> (Module, bool) {
    let mut parts: Vec<String> = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if parts.is_empty() && stem == "main" {
        return (vec![BINARY.to_owned()], true);
    }
    if parts.is_empty() && stem == "lib" {
        return (Vec::new(), false);
    }
    if stem != "mod" {
        parts.push(stem.to_owned());
    }
    if parts.first().is_some_and(|first| first == "cli") {
        parts.insert(0, BINARY.to_owned());
        return (parts, true);
    }
    (parts, false)
}

/// The paths a file writes, each with the module it is written in (a file's own module, or an
/// inline `mod` inside it, which `super::` starts from).
#[derive(Default)]
struct Paths {
    inline: Vec<String>,
    found: Vec<(Vec<String>, Vec<String>)>,
    /// `pub use` names: (module it is written in, the name it gives, the path it names).
    reexports: Vec<(Vec<String>, String, Vec<String>)>,
}

impl Paths {
    fn push(&mut self, segments: Vec<String>) {
        if matches!(
            segments.first().map(String::as_str),
            Some("crate" | "super" | "self" | "ampd")
        ) {
            self.found.push((self.inline.clone(), segments));
        }
    }

    fn use_tree(
        &mut self,
        prefix: &mut Vec<String>,
        tree: &syn::UseTree,
    ) -> Vec<(String, Vec<String>)> {
        let mut named = Vec::new();
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                named = self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                let mut full = prefix.clone();
                let ident = name.ident.to_string();
                if ident != "self" {
                    full.push(ident.clone());
                }
                let given = if ident == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    ident
                };
                named.push((given, full.clone()));
                self.push(full);
            }
            syn::UseTree::Rename(rename) => {
                let mut full = prefix.clone();
                if rename.ident != "self" {
                    full.push(rename.ident.to_string());
                }
                named.push((rename.rename.to_string(), full.clone()));
                self.push(full);
            }
            syn::UseTree::Glob(_) => self.push(prefix.clone()),
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    named.extend(self.use_tree(prefix, item));
                }
            }
        }
        named
    }

    /// Paths in a macro call's tokens: `crate :: a :: b`, at any depth of brackets.
    fn tokens(&mut self, tokens: TokenStream) {
        let trees: Vec<TokenTree> = tokens.into_iter().collect();
        let mut index = 0;
        while index < trees.len() {
            if let TokenTree::Group(group) = &trees[index] {
                self.tokens(group.stream());
                index += 1;
                continue;
            }
            let TokenTree::Ident(first) = &trees[index] else {
                index += 1;
                continue;
            };
            let mut segments = vec![first.to_string()];
            let mut next = index + 1;
            while let (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)), Some(tree)) =
                (trees.get(next), trees.get(next + 1), trees.get(next + 2))
            {
                let TokenTree::Ident(ident) = tree else {
                    break;
                };
                if a.as_char() != ':' || b.as_char() != ':' {
                    break;
                }
                segments.push(ident.to_string());
                next += 3;
            }
            if segments.len() > 1 {
                self.push(segments);
            }
            index = next;
        }
    }
}

impl<'a> Visit<'a> for Paths {
    fn visit_item_use(&mut self, item: &'a syn::ItemUse) {
        let public = !matches!(item.vis, syn::Visibility::Inherited);
        let mut prefix = Vec::new();
        if item.leading_colon.is_some() {
            prefix.push(String::new());
        }
        let named = self.use_tree(&mut prefix, &item.tree);
        if public {
            for (name, path) in named {
                self.reexports.push((self.inline.clone(), name, path));
            }
        }
    }

    fn visit_path(&mut self, path: &'a syn::Path) {
        if path.leading_colon.is_none() {
            self.push(
                path.segments
                    .iter()
                    .map(|segment| segment.ident.to_string())
                    .collect(),
            );
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'a syn::Macro) {
        self.tokens(mac.tokens.clone());
        syn::visit::visit_macro(self, mac);
    }

    fn visit_item_mod(&mut self, item: &'a syn::ItemMod) {
        self.inline.push(item.ident.to_string());
        syn::visit::visit_item_mod(self, item);
        self.inline.pop();
    }
}

/// The module tree: every file's module, and the names each module re-exports.
struct Tree {
    modules: BTreeSet<Module>,
    reexports: BTreeMap<Module, BTreeMap<String, Module>>,
}

impl Tree {
    /// The module an absolute path (from the root of the module tree) lands in: the longest
    /// file module it starts with, following re-exported names to where they are defined.
    fn resolve(&self, path: &[String]) -> Option<Module> {
        let mut path = path.to_vec();
        for _ in 0..8 {
            let length = (0..=path.len())
                .rev()
                .find(|&length| self.modules.contains(&path[..length]))?;
            let module = path[..length].to_vec();
            let Some(target) = path
                .get(length)
                .and_then(|name| self.reexports.get(&module)?.get(name))
            else {
                return Some(module);
            };
            let rest = path[length + 1..].to_vec();
            path = target.clone();
            path.extend(rest);
        }
        None
    }
}

/// Makes `segments` (as written in `module`, in the binary or not) absolute in the module tree.
fn absolute(module: &[String], in_binary: bool, segments: &[String]) -> Option<Vec<String>> {
    let root: Vec<String> = if in_binary {
        vec![BINARY.to_owned()]
    } else {
        Vec::new()
    };
    let mut rest = segments;
    let mut base = match rest.first()?.as_str() {
        "crate" => {
            rest = &rest[1..];
            root
        }
        "ampd" if in_binary => {
            rest = &rest[1..];
            Vec::new()
        }
        "self" | "super" => module.to_vec(),
        _ => return None,
    };
    while let Some(first) = rest.first() {
        match first.as_str() {
            "self" => {}
            "super" => {
                base.pop()?;
            }
            _ => break,
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn read_sources(src: &Path) -> Vec<Source> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let (module, in_binary) = module_of(file.strip_prefix(src).unwrap());
            let text = std::fs::read_to_string(&file).unwrap();
            let syntax = syn::parse_file(&text)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            Source {
                file,
                module,
                in_binary,
                syntax,
            }
        })
        .collect()
}

/// Every dependency between two modules, with the places that make it.
fn dependencies(sources: &[Source]) -> BTreeMap<(Module, Module), Vec<Reference>> {
    let mut tree = Tree {
        modules: sources.iter().map(|source| source.module.clone()).collect(),
        reexports: BTreeMap::new(),
    };
    let mut written = Vec::new();
    for source in sources {
        let mut paths = Paths::default();
        paths.visit_file(&source.syntax);
        for (inline, name, path) in paths.reexports {
            let mut module = source.module.clone();
            module.extend(inline);
            if let Some(target) = absolute(&module, source.in_binary, &path) {
                tree.reexports
                    .entry(module)
                    .or_default()
                    .insert(name, target);
            }
        }
        written.push(paths.found);
    }
    let mut edges: BTreeMap<(Module, Module), Vec<Reference>> = BTreeMap::new();
    for (source, found) in sources.iter().zip(written) {
        for (inline, segments) in found {
            let mut module = source.module.clone();
            module.extend(inline);
            let Some(target) =
                absolute(&module, source.in_binary, &segments).and_then(|path| tree.resolve(&path))
            else {
                continue;
            };
            if target != source.module {
                edges
                    .entry((source.module.clone(), target))
                    .or_default()
                    .push(Reference {
                        file: source.file.clone(),
                        written: segments.join("::"),
                    });
            }
        }
    }
    edges
}

fn layer(module: &Module) -> Option<usize> {
    ORDER
        .iter()
        .position(|name| module.first().is_some_and(|first| first == name))
}

/// Modules under one parent that depend on each other in a ring.
#[derive(Debug)]
struct Cycle {
    parent: String,
    /// In name order.
    members: Vec<String>,
    /// Each step with one place that makes it.
    steps: String,
}

/// Cycles known and left for now, each with why: (parent, members in name order).
const KNOWN_CYCLES: [(&str, &[&str]); 0] = [];

/// The cycles among sibling modules: each as the modules under one parent that depend on each
/// other in a ring, with one place that makes each step.
fn sibling_cycles(edges: &BTreeMap<(Module, Module), Vec<Reference>>) -> Vec<Cycle> {
    // Under each parent: child → child, with the reference that made it.
    let mut levels: BTreeMap<Module, BTreeMap<(String, String), Reference>> = BTreeMap::new();
    for ((from, to), references) in edges {
        let common = from.iter().zip(to).take_while(|(a, b)| a == b).count();
        if common == from.len() || common == to.len() {
            continue; // a module and its own parent or child
        }
        levels
            .entry(from[..common].to_vec())
            .or_default()
            .entry((from[common].clone(), to[common].clone()))
            .or_insert_with(|| references[0].clone());
    }
    let mut cycles = Vec::new();
    for (parent, steps) in &levels {
        let mut next: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in steps.keys() {
            next.entry(from).or_default().push(to);
        }
        let mut reported: BTreeSet<BTreeSet<&str>> = BTreeSet::new();
        for &start in next.keys() {
            let Some(ring) = shortest_ring(&next, start) else {
                continue;
            };
            if !reported.insert(ring.iter().copied().collect()) {
                continue;
            }
            let mut text = String::new();
            for pair in ring.windows(2) {
                let reference = &steps[&(pair[0].to_owned(), pair[1].to_owned())];
                text += &format!(
                    "\n    {} → {} ({}: {})",
                    pair[0],
                    pair[1],
                    reference.file.display(),
                    reference.written
                );
            }
            let mut members: Vec<String> = ring[1..].iter().map(|&name| name.to_owned()).collect();
            members.sort();
            cycles.push(Cycle {
                parent: parent.join("::"),
                members,
                steps: text,
            });
        }
    }
    cycles
}

/// The shortest way from `start` back to itself, as the modules passed (first = last).
fn shortest_ring<'a>(
    next: &BTreeMap<&'a str, Vec<&'a str>>,
    start: &'a str,
) -> Option<Vec<&'a str>> {
    let mut came_from: BTreeMap<&str, &str> = BTreeMap::new();
    let mut frontier = vec![start];
    while !frontier.is_empty() {
        let mut further = Vec::new();
        for node in frontier {
            for &to in next.get(node).into_iter().flatten() {
                if to == start {
                    let mut ring = vec![start, node];
                    let mut at = node;
                    while at != start {
                        at = came_from[at];
                        ring.push(at);
                    }
                    ring.reverse();
                    return Some(ring);
                }
                if !came_from.contains_key(to) {
                    came_from.insert(to, node);
                    further.push(to);
                }
            }
        }
        frontier = further;
    }
    None
}

fn server_dependencies() -> (usize, BTreeMap<(Module, Module), Vec<Reference>>) {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources = read_sources(&src);
    (sources.len(), dependencies(&sources))
}

#[test]
fn modules_only_import_to_their_left() {
    let (files, edges) = server_dependencies();
    assert!(files > 150, "only {files} files read");
    assert!(edges.len() > 500, "only {} dependencies found", edges.len());
    let mut wrong = Vec::new();
    for ((from, to), references) in &edges {
        let (Some(from_layer), Some(to_layer)) = (layer(from), layer(to)) else {
            continue;
        };
        if to_layer > from_layer {
            for reference in references {
                wrong.push(format!(
                    "{} names `{}`: {} may not depend on {}",
                    reference.file.display(),
                    reference.written,
                    ORDER[from_layer],
                    ORDER[to_layer]
                ));
            }
        }
    }
    for module in edges.keys().flat_map(|(from, to)| [from, to]) {
        assert!(
            module.is_empty() || layer(module).is_some(),
            "`{}` is not in the order",
            module.join("::")
        );
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn sibling_modules_do_not_depend_on_each_other_in_a_ring() {
    let (_, edges) = server_dependencies();
    let cycles = sibling_cycles(&edges);
    let known = |cycle: &Cycle| {
        KNOWN_CYCLES
            .iter()
            .any(|(parent, members)| cycle.parent == *parent && cycle.members == *members)
    };
    let new: Vec<String> = cycles
        .iter()
        .filter(|cycle| !known(cycle))
        .map(|cycle| format!("under `{}`:{}", cycle.parent, cycle.steps))
        .collect();
    assert!(new.is_empty(), "{}", new.join("\n"));
    for (parent, members) in KNOWN_CYCLES {
        assert!(
            cycles
                .iter()
                .any(|cycle| cycle.parent == parent && cycle.members == members),
            "the cycle {members:?} under `{parent}` is gone: take it off KNOWN_CYCLES"
        );
    }
}

/// The reader sees what the compiler sees: a grouped import, nested braces, `super::` from a
/// file and from a `mod` inside it, an inline path in code and in a macro call, a re-export
/// followed to its definition.
#[test]
fn every_spelling_of_a_dependency_is_read() {
    let source = |file: &str, text: &str| {
        let (module, in_binary) = module_of(Path::new(file));
        Source {
            file: PathBuf::from(file),
            module,
            in_binary,
            syntax: syn::parse_file(text).unwrap(),
        }
    };
    let sources = [
        source(
            "a/mod.rs",
            "pub mod b; pub mod c; pub mod d; pub mod e; pub mod f; pub mod g; \
             pub use self::g::Thing;",
        ),
        source(
            "a/b.rs",
            "use crate::{a::{c::{self, X}, d::Y}, h}; \
             fn f() { crate::a::e::run(); } \
             mod tests { use super::super::f::Z; fn t() { assert!(crate::a::Thing::new()); } }",
        ),
        source("a/c.rs", ""),
        source("a/d.rs", ""),
        source("a/e.rs", ""),
        source("a/f.rs", "use super::b::Q;"),
        source("a/g.rs", ""),
        source("h.rs", ""),
        source("main.rs", "use ampd::a::c::X;"),
    ];
    let edges = dependencies(&sources);
    let named = |from: &str| -> BTreeSet<String> {
        edges
            .keys()
            .filter(|(source, _)| source.join("::") == from)
            .map(|(_, target)| target.join("::"))
            .collect()
    };
    assert_eq!(
        named("a::b"),
        ["a::c", "a::d", "a::e", "a::f", "a::g", "h"]
            .map(String::from)
            .into()
    );
    assert_eq!(named("cli"), ["a::c"].map(String::from).into());
    let cycles = sibling_cycles(&edges);
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(
        (cycles[0].parent.as_str(), &cycles[0].members[..]),
        ("a", &["b".to_owned(), "f".to_owned()][..])
    );
    assert!(cycles[0].steps.contains("b → f") && cycles[0].steps.contains("f → b"));
}
