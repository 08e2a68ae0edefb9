//! `--include` / `--exclude` patterns for tree copies, as rclone users
//! write them.
//!
//! Patterns are globs matched against the path relative to the copied
//! tree, with `/` between components: `*` and `?` stay within one
//! component, `**` crosses them, `[a-z]` and `{a,b}` work as in a shell.
//! A pattern that starts with `/` is anchored at the top of the tree;
//! any other matches at any depth (`*.tmp` is `**/*.tmp`). A pattern that
//! ends in `/` names directories only: `--exclude scratch/` skips every
//! directory called `scratch` with everything in it.
//!
//! Excludes are checked first; then, if any `--include` was given, a
//! file must match one of them (directories are always entered, so
//! `--include '*.nc'` finds `.nc` files at any depth).

use globset::{Glob, GlobBuilder, GlobSet, GlobSetBuilder};
use thiserror::Error;

#[derive(Debug, Error)]
#[error("bad pattern {pattern:?}: {error}")]
pub struct FilterError {
    pub pattern: String,
    pub error: String,
}

/// Compiled include and exclude rules.
#[derive(Debug, Clone, Default)]
pub struct Filter {
    exclude_files: Option<GlobSet>,
    exclude_dirs: Option<GlobSet>,
    include: Option<GlobSet>,
    /// The patterns as given, for messages.
    pub describe: Vec<String>,
}

fn glob(pattern: &str) -> Result<Glob, FilterError> {
    let body = pattern.trim_end_matches('/');
    let full = match body.strip_prefix('/') {
        Some(anchored) => anchored.to_string(),
        None => format!("{{{body},**/{body}}}"),
    };
    GlobBuilder::new(&full)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| FilterError { pattern: pattern.to_string(), error: e.kind().to_string() })
}

fn set(patterns: &[&String]) -> Result<Option<GlobSet>, FilterError> {
    if patterns.is_empty() {
        return Ok(None);
    }
    let mut b = GlobSetBuilder::new();
    for p in patterns {
        b.add(glob(p)?);
    }
    b.build().map(Some).map_err(|e| FilterError { pattern: String::new(), error: e.to_string() })
}

impl Filter {
    pub fn new(include: &[String], exclude: &[String]) -> Result<Self, FilterError> {
        let files: Vec<&String> = exclude.iter().filter(|p| !p.ends_with('/')).collect();
        // A file pattern excludes directories of that name too (rclone).
        let all: Vec<&String> = exclude.iter().collect();
        let describe = exclude
            .iter()
            .map(|p| format!("--exclude {p}"))
            .chain(include.iter().map(|p| format!("--include {p}")))
            .collect();
        Ok(Self {
            exclude_files: set(&files)?,
            exclude_dirs: set(&all)?,
            include: set(&include.iter().collect::<Vec<_>>())?,
            describe,
        })
    }

    pub fn is_empty(&self) -> bool {
        self.exclude_files.is_none() && self.exclude_dirs.is_none() && self.include.is_none()
    }

    /// Whether the file at `rel` (relative, `/`-separated) is copied.
    pub fn wants_file(&self, rel: &str) -> bool {
        if self.exclude_files.as_ref().is_some_and(|s| s.is_match(rel)) {
            return false;
        }
        self.include.as_ref().is_none_or(|s| s.is_match(rel))
    }

    /// Whether the directory at `rel` is entered.
    pub fn wants_dir(&self, rel: &str) -> bool {
        !self.exclude_dirs.as_ref().is_some_and(|s| s.is_match(rel))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(inc: &[&str], exc: &[&str]) -> Filter {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        Filter::new(&s(inc), &s(exc)).unwrap()
    }

    #[test]
    fn rclone_style_patterns() {
        let x = f(&[], &["*.tmp", "/top.log", "scratch/"]);
        assert!(!x.wants_file("a.tmp") && !x.wants_file("d/e/a.tmp"));
        assert!(x.wants_file("a.tmpx") && x.wants_file("d/top.log"));
        assert!(!x.wants_file("top.log"));
        assert!(!x.wants_dir("scratch") && !x.wants_dir("a/scratch"));
        assert!(x.wants_dir("scratchy") && x.wants_file("scratch"), "a dir-only pattern leaves files alone");
        let i = f(&["*.nc", "/meta/**"], &["bad*"]);
        assert!(i.wants_file("x.nc") && i.wants_file("run/1/x.nc") && i.wants_file("meta/a/b.txt"));
        assert!(!i.wants_file("x.txt") && !i.wants_file("bad.nc") && !i.wants_file("run/meta/a.txt"));
        assert!(i.wants_dir("anything"));
        assert!(f(&[], &[]).is_empty());
        assert!(Filter::new(&[], &["[".into()]).is_err());
    }
}
