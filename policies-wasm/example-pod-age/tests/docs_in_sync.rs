//! The docs quote real files: every fenced block preceded by `<!-- file: PATH -->` in
//! `docs/writing-a-policy.md`, `docs/writing-a-policy-python.md` and `docs/abi.md` must equal the
//! file at PATH (relative to the repository root), so the walkthrough can never drift from the
//! code it explains.

use std::path::{Path, PathBuf};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("policies-wasm/example-pod-age is two levels below the repository root")
        .to_path_buf()
}

/// `(path, block)` for every quoted file of a markdown document.
fn quoted_files(markdown: &str) -> Vec<(String, String)> {
    const MARKER: &str = "<!-- file: ";
    let mut quoted = Vec::new();
    let mut rest = markdown;
    while let Some(start) = rest.find(MARKER) {
        rest = &rest[start + MARKER.len()..];
        let end = rest.find(" -->").expect("a file marker ends with ` -->`");
        let path = rest[..end].to_string();
        rest = &rest[end..];
        let fence = rest
            .find("\n```")
            .expect("a file marker is followed by a fenced block");
        rest = &rest[fence + 4..];
        let body_start = rest.find('\n').expect("the fence line ends") + 1;
        rest = &rest[body_start..];
        let body_end = rest.find("\n```").expect("the fenced block is closed");
        quoted.push((path, format!("{}\n", &rest[..body_end])));
        rest = &rest[body_end + 4..];
    }
    quoted
}

fn check(doc: &str, at_least: usize) {
    let root = repo_root();
    let markdown = std::fs::read_to_string(root.join(doc)).unwrap_or_else(|e| panic!("{doc}: {e}"));
    let quoted = quoted_files(&markdown);
    assert!(
        quoted.len() >= at_least,
        "{doc} quotes {} files, expected at least {at_least}",
        quoted.len()
    );
    for (path, block) in quoted {
        let file = std::fs::read_to_string(root.join(&path))
            .unwrap_or_else(|e| panic!("{doc} quotes {path}: {e}"));
        assert!(
            block == file,
            "{doc} quotes {path}, but the quote differs from the file: copy the file into the doc \
             (first differing line: {:?})",
            block.lines().zip(file.lines()).find(|(a, b)| a != b)
        );
    }
}

#[test]
fn writing_a_policy_quotes_the_example_crate() {
    check("docs/writing-a-policy.md", 3);
}

#[test]
fn abi_quotes_the_wit() {
    check("docs/abi.md", 1);
}

#[test]
fn writing_a_policy_in_python_quotes_the_python_example() {
    check("docs/writing-a-policy-python.md", 1);
}
