//! The simulated disk keeps what fsyncs covered, and a crash may take
//! anything else.

use super::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

/// A file `/d/f` holding `bytes`, written and fsynced, in a directory that
/// is fsynced too when `sync_dir`.
fn written(disk: &SimDisk, bytes: &[u8], sync_file: bool, sync_dir: bool) {
    disk.create_dir_all(&p("/d")).unwrap();
    disk.sync_dir(&p("/")).unwrap();
    let f = disk.open(&p("/d/f"), OpenMode::Create).unwrap();
    f.write_all_at(bytes, 0).unwrap();
    if sync_file {
        f.sync_data().unwrap();
    }
    if sync_dir {
        disk.sync_dir(&p("/d")).unwrap();
    }
}

/// What `/d/f` holds after a crash (None: the name is gone).
fn after_crash(disk: &SimDisk) -> Option<Vec<u8>> {
    disk.crash();
    disk.read(&p("/d/f")).ok()
}

#[test]
fn a_file_fsynced_in_an_fsynced_directory_survives_every_crash() {
    for seed in 0..200 {
        let disk = SimDisk::new(seed);
        written(&disk, b"durable", true, true);
        assert_eq!(after_crash(&disk).as_deref(), Some(&b"durable"[..]), "seed {seed}");
    }
}

#[test]
fn a_new_file_whose_directory_was_not_fsynced_can_vanish() {
    let outcomes: Vec<bool> = (0..200)
        .map(|seed| {
            let disk = SimDisk::new(seed);
            written(&disk, b"data", true, false);
            after_crash(&disk).is_some()
        })
        .collect();
    assert!(outcomes.contains(&true) && outcomes.contains(&false));
}

#[test]
fn unsynced_writes_are_kept_dropped_or_torn() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..400 {
        let disk = SimDisk::new(seed);
        written(&disk, b"first", true, true);
        let f = disk.open(&p("/d/f"), OpenMode::ReadWrite).unwrap();
        f.write_all_at(b"+second", 5).unwrap();
        f.write_all_at(b"+third", 12).unwrap();
        let content = after_crash(&disk).unwrap();
        assert!(content.starts_with(b"first"), "seed {seed}: the synced part is intact");
        seen.insert(content);
    }
    for expected in [&b"first"[..], b"first+second", b"first+second+third", b"first\0\0\0\0\0\0\0+third"] {
        assert!(seen.contains(expected), "{:?} never happened", String::from_utf8_lossy(expected));
    }
    assert!(seen.iter().any(|c| c.len() > 5 && c.len() < 12), "a torn write");
}

#[test]
fn a_rename_is_atomic_and_durable_only_after_the_directory_fsync() {
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let disk = SimDisk::new(seed);
        written(&disk, b"old", true, true);
        let tmp = disk.open(&p("/d/f.tmp"), OpenMode::Create).unwrap();
        tmp.write_all_at(b"new", 0).unwrap();
        tmp.sync_all().unwrap();
        disk.rename(&p("/d/f.tmp"), &p("/d/f")).unwrap();
        let content = after_crash(&disk).expect("one of the two names always survives");
        outcomes.insert(content);
        // With the directory fsynced, only the new content can be there.
        let disk = SimDisk::new(seed);
        written(&disk, b"old", true, true);
        let tmp = disk.open(&p("/d/f.tmp"), OpenMode::Create).unwrap();
        tmp.write_all_at(b"new", 0).unwrap();
        tmp.sync_all().unwrap();
        disk.rename(&p("/d/f.tmp"), &p("/d/f")).unwrap();
        disk.sync_dir(&p("/d")).unwrap();
        assert_eq!(after_crash(&disk).as_deref(), Some(&b"new"[..]));
        assert!(disk.read(&p("/d/f.tmp")).is_err());
    }
    assert_eq!(outcomes, [b"new".to_vec(), b"old".to_vec()].into_iter().collect());
}

#[test]
fn a_renamed_directory_keeps_its_files_and_the_rename_is_atomic() {
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let disk = SimDisk::new(seed);
        written(&disk, b"kept", true, true);
        disk.rename(&p("/d"), &p("/e")).unwrap();
        assert_eq!(disk.read(&p("/e/f")).unwrap(), b"kept");
        assert!(disk.read(&p("/d/f")).is_err() && !disk.is_dir(&p("/d")));
        disk.crash();
        let (old, new) = (disk.read(&p("/d/f")).ok(), disk.read(&p("/e/f")).ok());
        assert!(old.is_some() != new.is_some(), "seed {seed}: exactly one name survives");
        assert_eq!(old.or(new).as_deref(), Some(&b"kept"[..]), "seed {seed}");
        outcomes.insert(disk.is_dir(&p("/e")));
    }
    assert_eq!(outcomes.len(), 2, "the rename is durable only after the parent's fsync");
}

#[test]
fn a_removed_directory_may_come_back_partly_until_its_parent_is_fsynced() {
    let mut outcomes = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let disk = SimDisk::new(seed);
        written(&disk, b"doomed", true, true);
        disk.remove_dir_all(&p("/d")).unwrap();
        assert!(!disk.is_dir(&p("/d")) && disk.list(&p("/")).unwrap().is_empty());
        disk.crash();
        outcomes.insert((disk.is_dir(&p("/d")), disk.read(&p("/d/f")).is_ok()));
        // Created again under the same name, it is a new, empty directory.
        disk.remove_dir_all(&p("/d")).ok();
        disk.create_dir_all(&p("/d")).unwrap();
        disk.sync_dir(&p("/")).unwrap();
        disk.crash();
        assert!(disk.is_dir(&p("/d")) && disk.list(&p("/d")).unwrap().is_empty(), "seed {seed}");
    }
    assert!(outcomes.contains(&(false, false)) && outcomes.contains(&(true, true)), "{outcomes:?}");
    let disk = SimDisk::new(1);
    written(&disk, b"doomed", true, true);
    disk.remove_dir_all(&p("/d")).unwrap();
    disk.sync_dir(&p("/")).unwrap();
    disk.crash();
    assert!(!disk.is_dir(&p("/d")), "durable once the parent is fsynced");
}

#[test]
fn handles_opened_before_a_crash_fail() {
    let disk = SimDisk::new(1);
    written(&disk, b"x", true, true);
    let f = disk.open(&p("/d/f"), OpenMode::ReadWrite).unwrap();
    disk.crash();
    assert!(f.write_all_at(b"y", 0).is_err());
    assert!(f.sync_data().is_err());
    assert_eq!(disk.read(&p("/d/f")).unwrap(), b"x");
}

#[test]
fn injected_faults_are_eio_or_enospc_and_a_failed_fsync_makes_nothing_durable() {
    let disk = SimDisk::new(7);
    written(&disk, b"base", true, true);
    let f = disk.open(&p("/d/f"), OpenMode::ReadWrite).unwrap();
    f.write_all_at(b"tail", 4).unwrap();
    disk.set_faults(Faults { sync: 1.0, ..Faults::NONE });
    let err = f.sync_data().unwrap_err();
    assert!(matches!(err.raw_os_error(), Some(libc::EIO | libc::ENOSPC)), "{err}");
    disk.set_faults(Faults::all(1.0));
    assert!(f.write_all_at(b"more", 8).is_err());
    assert!(disk.sync_dir(&p("/d")).is_err());
    assert!(disk.rename(&p("/d/f"), &p("/d/g")).is_err());
    assert!(disk.open(&p("/d/h"), OpenMode::Create).is_err());
    assert!(disk.stats().injected_faults >= 5);
    disk.set_faults(Faults::NONE);
    // Whatever survives, the fsynced prefix does, and nothing is invented.
    let content = after_crash(&disk).unwrap();
    assert!(content.starts_with(b"base") && b"basetailmore".starts_with(&content), "{content:?}");
}

#[test]
fn the_same_seed_gives_the_same_crash() {
    let run = |seed| {
        let disk = SimDisk::new(seed);
        disk.set_faults(Faults::all(0.2));
        let _ = disk.create_dir_all(&p("/d"));
        let mut results = Vec::new();
        for i in 0..50u8 {
            let name = p(&format!("/d/{}", i % 7));
            if let Ok(f) = disk.open(&name, OpenMode::Create) {
                results.push(f.write_all_at(&[i; 9], 0).is_ok());
                results.push(f.sync_data().is_ok());
            }
            results.push(disk.sync_dir(&p("/d")).is_ok());
        }
        disk.crash();
        let mut names = disk.list(&p("/d")).unwrap_or_default();
        names.sort();
        let contents: Vec<Vec<u8>> = names.iter().map(|n| disk.read(&p("/d").join(n)).unwrap()).collect();
        (results, names, contents, disk.stats())
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
}
