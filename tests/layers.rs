//! The crate's layers, as docs/architecture.md draws them, checked on the
//! source text: the catalog is a ground floor that imports neither the
//! coordinator nor the data plane; those two never import each other (what
//! needs both, deleting a topic, is `topic_deletion`, above them); and the
//! coordinator's pure state machine never imports its runtime.
//!
//! A `use` the check misses would have to spell a path in a way this crate
//! does not (it writes `crate::module::…` in full), so the test reads code
//! lines only, skipping comments.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    let mut entries = fs::read_dir(dir)?.map(|e| e.map(|e| e.path())).collect::<io::Result<Vec<PathBuf>>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// Every code line (comments skipped) under `src/<relative>` that names
/// one of `forbidden`, as `file:line: text`.
fn offending_lines(relative: &str, forbidden: &[&str]) -> io::Result<Vec<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let root = src.join(relative);
    let mut files = Vec::new();
    if root.is_dir() {
        rust_files(&root, &mut files)?;
    } else {
        files.push(root);
    }
    if files.is_empty() {
        return Err(io::Error::other(format!("no Rust files under src/{relative}")));
    }
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(&file)?;
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if forbidden.iter().any(|f| code.contains(f)) {
                let shown = file.strip_prefix(&src).unwrap_or(&file).display().to_string();
                found.push(format!("src/{shown}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    Ok(found)
}

#[test]
fn the_catalog_imports_neither_the_coordinator_nor_the_data_plane() {
    let found =
        offending_lines("catalog.rs", &["crate::coordinator", "crate::topics", "crate::topic_deletion"]).unwrap();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_coordinator_does_not_import_the_data_plane() {
    let found = offending_lines("coordinator", &["crate::topics", "crate::topic_deletion"]).unwrap();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_data_plane_does_not_import_the_coordinator() {
    let found = offending_lines("topics", &["crate::coordinator", "crate::topic_deletion"]).unwrap();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_coordinators_state_machine_does_not_import_its_runtime() {
    let runtime: Vec<String> =
        ["runtime", "clock", "fake_log", "layout", "routing", "service", "shard", "shell", "sim"]
            .iter()
            .flat_map(|m| [format!("coordinator::{m}"), format!("super::super::{m}")])
            .chain(["coordinator::Coordinator".to_string(), "tokio".to_string()])
            .collect();
    let forbidden: Vec<&str> = runtime.iter().map(String::as_str).collect();
    let found = offending_lines("coordinator/state", &forbidden).unwrap();
    assert!(found.is_empty(), "{found:#?}");
}
