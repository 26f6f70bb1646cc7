use std::{
    os::unix::fs::symlink,
    path::PathBuf,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

use super::*;
use crate::bounded_file::read;

fn reason(result: Result<Vec<u8>, FileError>) -> String {
    match result {
        Ok(bytes) => format!("read {} bytes", bytes.len()),
        Err(FileError::NotFound) => "not found".to_owned(),
        Err(FileError::Refused(why)) => why,
    }
}

/// A directory `outside` holding `victim` with `content`, and a members directory whose
/// `link` is a symlink to that file.
pub(crate) fn linked_out(
    victim: &str,
    content: &str,
    link: &str,
) -> (tempfile::TempDir, tempfile::TempDir) {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join(victim), content).unwrap();
    let dir = tempfile::tempdir().unwrap();
    symlink(outside.path().join(victim), dir.path().join(link)).unwrap();
    (outside, dir)
}

/// Makes a FIFO at `path`: a file whose read blocks until someone writes.
pub(crate) fn fifo(path: &Path) {
    let mode = Mode::RUSR | Mode::WUSR;
    rustix::fs::mknodat(rustix::fs::CWD, path, FileType::Fifo, mode, 0).unwrap();
}

/// The entries of `dir`, sorted: what a test expects to find there.
pub(crate) fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

#[test]
fn files_inside_the_directory_are_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t"), "tok").unwrap();
    assert_eq!(read(dir.path(), Path::new("t"), 16).unwrap(), b"tok");
    assert_eq!(read(dir.path(), &dir.path().join("t"), 16).unwrap(), b"tok");
    let missing = read(dir.path(), Path::new("missing"), 16);
    assert!(matches!(missing, Err(FileError::NotFound)), "{missing:?}");
}

#[test]
fn the_kubelet_data_layout_is_fine() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("..2026_01_01_00_00_00.1");
    std::fs::create_dir(&data).unwrap();
    std::fs::write(data.join("token"), "tok").unwrap();
    symlink("..2026_01_01_00_00_00.1", dir.path().join("..data")).unwrap();
    symlink("..data/token", dir.path().join("token")).unwrap();
    assert_eq!(read(dir.path(), Path::new("token"), 16).unwrap(), b"tok");
}

#[test]
fn paths_out_of_the_directory_are_refused() {
    let (outside, dir) = linked_out("secret", "not yours", "link");
    symlink(outside.path(), dir.path().join("linked-dir")).unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    // Relative, and climbing out only through a symlink's target.
    let depth = dir.path().components().count();
    let up = "../".repeat(depth);
    symlink(
        format!("{up}{}", outside.path().join("secret").display()),
        sub.join("climb"),
    )
    .unwrap();
    for (path, want) in [
        (outside.path().join("secret"), "absolute path"),
        (PathBuf::from("../secret"), "'..'"),
        (PathBuf::from("sub/../../secret"), "'..'"),
        (PathBuf::from("link"), "leads out"),
        (PathBuf::from("linked-dir/secret"), "leads out"),
        (PathBuf::from("sub/climb"), "leads out"),
    ] {
        let got = reason(read(dir.path(), &path, 1024));
        assert!(got.contains(want), "{}: {got}", path.display());
    }
}

#[test]
fn an_absolute_symlink_is_refused_even_when_it_points_inside() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t"), "tok").unwrap();
    symlink(dir.path().join("t"), dir.path().join("abs")).unwrap();
    assert!(reason(read(dir.path(), Path::new("abs"), 16)).contains("leads out"));
}

#[test]
fn only_small_regular_files_are_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("big"), vec![b'x'; 17]).unwrap();
    std::fs::create_dir(dir.path().join("d")).unwrap();
    symlink("/dev/zero", dir.path().join("zero")).unwrap();
    assert!(reason(read(dir.path(), Path::new("big"), 16)).contains("larger than 16"));
    assert!(reason(read(dir.path(), Path::new("d"), 16)).contains("not a regular file"));
    assert!(reason(read(dir.path(), Path::new("zero"), 16)).contains("leads out"));
}

#[test]
fn a_fifo_and_a_device_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let make = |name: &str, kind: FileType, dev: u64| {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.path().join(name),
            kind,
            Mode::RUSR | Mode::WUSR,
            dev,
        )
    };
    make("fifo", FileType::Fifo, 0).unwrap();
    // `/dev/null`'s numbers (1, 3); making a device node needs CAP_MKNOD.
    let device = make("null", FileType::CharacterDevice, rustix::fs::makedev(1, 3));
    let started = Instant::now();
    assert!(reason(read(dir.path(), Path::new("fifo"), 16)).contains("not a regular file"));
    match device {
        Ok(()) => {
            assert!(reason(read(dir.path(), Path::new("null"), 16)).contains("not a regular file"));
        }
        Err(err) => eprintln!("no device node made ({err}); the FIFO case still ran"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));
}

/// A directory on the path is swapped for a symlink out while it is read: a check-then-open
/// reader reads the outside file now and then; the kernel's beneath-resolution never does.
#[test]
fn a_directory_swapped_for_a_symlink_out_is_never_followed() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("token"), "outside").unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/token"), "inside").unwrap();
    symlink(outside.path(), dir.path().join("alt")).unwrap();

    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let stop = Arc::clone(&stop);
        let root = dir.path().to_owned();
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                rustix::fs::renameat_with(
                    rustix::fs::CWD,
                    root.join("sub"),
                    rustix::fs::CWD,
                    root.join("alt"),
                    rustix::fs::RenameFlags::EXCHANGE,
                )
                .unwrap();
            }
        })
    };
    let started = Instant::now();
    let (mut inside, mut outside_reads) = (0, 0);
    while started.elapsed() < Duration::from_millis(1500) {
        if let Ok(bytes) = read(dir.path(), Path::new("sub/token"), 16) {
            match bytes.as_slice() {
                b"inside" => inside += 1,
                _ => outside_reads += 1,
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(inside > 0, "the swap left no time to read the inside file");
    assert_eq!(
        outside_reads, 0,
        "read the file outside {outside_reads} times"
    );
}

#[test]
fn a_file_is_replaced_by_an_atomic_rename_and_nothing_is_left_behind() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("t"), "old").unwrap();
    let members = MembersDir::open(dir.path()).unwrap();
    members.replace(Path::new("t"), b"new").unwrap();
    members.replace(Path::new("fresh"), b"created").unwrap();
    let content = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    assert_eq!(
        (content("t"), content("fresh")),
        ("new".into(), "created".into())
    );
    assert_eq!(names(dir.path()), ["fresh", "t"]);
    let mode = std::fs::metadata(dir.path().join("t")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
}

#[test]
fn a_replaced_symlink_out_is_replaced_itself_and_nothing_outside_is_written() {
    let (outside, dir) = linked_out("victim", "untouched", "t");
    let members = MembersDir::open(dir.path()).unwrap();
    members.replace(Path::new("t"), b"new").unwrap();
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim")).unwrap(),
        "untouched"
    );
    assert_eq!(names(outside.path()), ["victim"]);
    assert!(dir.path().join("t").symlink_metadata().unwrap().is_file());
    assert_eq!(names(dir.path()), ["t"]);
}

#[test]
fn only_plain_names_are_replaced() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let members = MembersDir::open(dir.path()).unwrap();
    for name in ["../t", "sub/t", "/tmp/t", "", "."] {
        let got = reason(members.replace(Path::new(name), b"x").map(|()| Vec::new()));
        assert!(got.contains("plain file name"), "{name}: {got}");
    }
    // A target that is a directory fails, and its temporary file goes with it.
    let got = reason(members.replace(Path::new("sub"), b"x").map(|()| Vec::new()));
    assert!(got.contains("not written"), "{got}");
    assert_eq!(names(dir.path()), ["sub"]);
}
