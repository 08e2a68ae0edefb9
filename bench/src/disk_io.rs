//! Scenario `disk-io` (issue 16): disk to disk at the disk's speed, both
//! directions, with the variants that separate the read limit from the
//! write limit (disk to memory, memory to disk, a tmpfs destination) and
//! every anchor in the same run — fio reading and writing at once (a
//! copy's load on one device), `cp` + `sync`, `globus-url-copy -p 4`.
//!
//! Every row drops the page cache first and is timed until `sync`
//! returns, so a tool that leaves its writes in memory is not rewarded.
//! Ferry rows run against a `ferry serve` of their own (its peak memory
//! is recorded); uploads write into a directory of the served tree that
//! the Globus server's `nobody` may write.

use crate::record::{Comparison, Layout, PlotKind, Role, VariantInfo};
use crate::scenarios::{Action, DataSpec, Dirs, Group, OwnServer, Plan, Scenario, Stage, Variant};
use crate::servers::ServerKind;
use crate::tools::{ClientKind, Dest, FioJob};
use std::path::{Path, PathBuf};

fn info(id: &str, label: &str, role: Role) -> VariantInfo {
    VariantInfo { id: id.into(), label: label.into(), role, series: String::new(), not_applicable: None }
}

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

/// Cold cache, timed until `sync`.
fn cold(info: VariantInfo, action: Action) -> Variant {
    Variant { info, action, cold: true, sync_after: true }
}

/// A `ferry cp` against its own `ferry serve SERVE`.
fn ferry(id: &str, label: &str, serve: &str, cp: &str, source: &Path, dest: Dest, bytes: u64) -> Variant {
    let o = OwnServer {
        serve_flags: words(serve),
        env: vec![],
        flags: words(cp),
        source: source.into(),
        dest,
        bytes,
        old: false,
    };
    cold(info(id, label, Role::Ferry), Action::OwnFerryServer(Box::new(o)))
}

fn globus(source: &Path, dest: Dest, bytes: u64) -> Variant {
    cold(
        info("guc", "globus-url-copy -p 4", Role::Globus),
        Action::Transfer {
            client: ClientKind::GlobusUrlCopy,
            server: ServerKind::Globus,
            flags: words("-p 4"),
            source: source.into(),
            dest,
            bytes,
            files: 1,
            setup_source: None,
        },
    )
}

fn group(id: &str, label: &str, variants: Vec<Variant>, comparisons: Vec<Comparison>) -> Group {
    Group { id: id.into(), label: label.into(), x: None, variants, comparisons }
}

/// Against Globus in the group, fio's copy and `cp` in the anchors' group.
fn versus_disk(ids: &[&str]) -> Vec<Comparison> {
    let mut c = Vec::new();
    for id in ids {
        c.push(Comparison::until_sync(id, "guc"));
        c.push(Comparison::until_sync(id, "fio-copy").in_group("disk"));
        c.push(Comparison::until_sync(id, "cp").in_group("disk"));
    }
    c
}

pub fn disk_io(plan: &Plan, dirs: &Dirs) -> Scenario {
    let size = plan.disk_size;
    let tag = crate::scenarios::gb(size).replace(' ', "");
    let src = dirs.disk_data().join(format!("dio-{tag}.bin"));
    let mem_src = dirs.shm_data().join(format!("dio-mem-{tag}.bin"));
    let out = dirs.out();
    // Uploads land inside the served tree; the Globus server runs as
    // nobody, so the directory is world-writable (sticky).
    let up = dirs.disk_data().join("dio-up");
    make_upload_dir(&up);
    let file = |name: &str| Dest::File(out.join(name));
    let upload = |name: &str| Dest::Upload(up.join(name));

    let default = "-p 4";
    let staged = "-p 4 --staging 16M";
    let direct = "-p 4 --direct-io";

    let down = group(
        "down",
        "download, disk to disk",
        vec![
            ferry("ferry", "ferry cp -p 4", "", default, &src, file("f.dat"), size),
            ferry(
                "ferry-staged",
                "ferry cp -p 4, staged 16 MiB both ends",
                "--staging 16M",
                staged,
                &src,
                file("f.dat"),
                size,
            ),
            ferry(
                "ferry-direct",
                "ferry cp -p 4, O_DIRECT both ends",
                "--direct-io",
                direct,
                &src,
                file("f.dat"),
                size,
            ),
            globus(&src, file("g.dat"), size),
        ],
        versus_disk(&["ferry", "ferry-staged", "ferry-direct"]),
    );
    let upl = group(
        "up",
        "upload, disk to disk",
        vec![
            ferry("ferry", "ferry cp -p 4", "", default, &src, upload("f.dat"), size),
            ferry(
                "ferry-staged",
                "ferry cp -p 4, staged 16 MiB both ends",
                "--staging 16M",
                staged,
                &src,
                upload("f.dat"),
                size,
            ),
            ferry(
                "ferry-direct",
                "ferry cp -p 4, O_DIRECT both ends",
                "--direct-io",
                direct,
                &src,
                upload("f.dat"),
                size,
            ),
            globus(&src, upload("g.dat"), size),
        ],
        versus_disk(&["ferry", "ferry-staged", "ferry-direct"]),
    );
    let to_mem = group(
        "disk-mem",
        "disk to memory (read limit)",
        vec![
            ferry("ferry", "ferry cp -p 4 to /dev/null", "", default, &src, Dest::DevNull, size),
            globus(&src, Dest::DevNull, size),
        ],
        vec![Comparison::rate("ferry", "guc"), Comparison::rate("ferry", "fio-read").in_group("disk")],
    );
    let anchors = group(
        "disk",
        "disk limits",
        vec![
            cold(
                info("fio-read", "fio read, O_DIRECT, 1 MiB, QD1", Role::Disk),
                Action::Fio { job: FioJob::Read { file: src.clone() }, size },
            ),
            cold(
                info("fio-write", "fio write, O_DIRECT, 1 MiB, QD1, fsync", Role::Disk),
                Action::Fio { job: FioJob::Write { file: out.join("fio-write.dat") }, size },
            ),
            cold(
                info("fio-copy", "fio read + write at once (a copy's load)", Role::Disk),
                Action::Fio { job: FioJob::Copy { from: src.clone(), to: out.join("fio-copy.dat") }, size },
            ),
            cold(
                info("cp", "cp + sync", Role::Disk),
                Action::Cp { src: src.clone(), dst: out.join("cp.dat"), bytes: size },
            ),
        ],
        vec![],
    );
    // Memory sources: a tmpfs file served from the tmpfs directory.
    let from_mem = group(
        "mem-disk",
        "memory to disk (write limit)",
        vec![
            ferry("ferry", "ferry cp -p 4 from tmpfs", "", default, &mem_src, file("f.dat"), size),
            globus(&mem_src, file("g.dat"), size),
        ],
        vec![Comparison::until_sync("ferry", "guc"), Comparison::until_sync("ferry", "fio-write").in_group("disk")],
    );
    let shm_out = dirs.shm_out();
    let tmpfs = group(
        "tmpfs",
        "memory to a tmpfs file",
        vec![
            ferry("ferry", "ferry cp -p 4 into tmpfs", "", default, &mem_src, Dest::File(shm_out.join("f.dat")), size),
            globus(&mem_src, Dest::File(shm_out.join("g.dat")), size),
        ],
        vec![Comparison::until_sync("ferry", "guc"), Comparison::rate("ferry", "guc")],
    );
    Scenario {
        name: "disk-io",
        number: "11",
        title: "Disk to disk at the disk's speed (issue 16)".into(),
        description: format!(
            "One {} file of random bytes on the ext4 disk (`{}`), over 127.0.0.1, with 4 parallel streams: \
             downloads (the server's disk to a new file on the client's disk) and uploads (the other way; the \
             destination is `{}` on the same file system), then disk to memory (`/dev/null`: the read side \
             alone), memory to disk (a tmpfs source: the write side alone) and memory to a tmpfs file. Before \
             every row the page cache is dropped (`sync; echo 3 > /proc/sys/vm/drop_caches`); \"until sync\" \
             adds a `sync` after the client exits, so every byte is on the device, as the issue asks. Ferry \
             rows run against a `ferry serve` of their own (its peak resident memory is the \"server peak RSS\" \
             column); the anchors are `globus-url-copy -p 4` against `globus-gridftp-server`, fio (sequential \
             O_DIRECT 1 MiB reads, writes with a final fsync, and both at once on the same device: a copy's \
             load) and `cp` + `sync`. The round-trips column does not apply on loopback.",
            crate::scenarios::gb(size),
            src.display(),
            up.display(),
        ),
        layout: Layout::DataPath,
        plot: PlotKind::Bars,
        reps: plan.reps_local.min(2),
        data: vec![DataSpec::File { path: src.clone(), size }, DataSpec::File { path: mem_src.clone(), size }],
        stages: vec![
            Stage { wan: None, ferry_root: dirs.disk_data(), groups: vec![down, upl, to_mem, anchors] },
            Stage { wan: None, ferry_root: dirs.shm_data(), groups: vec![from_mem, tmpfs] },
        ],
    }
}

/// The upload directory, writable by the Globus server's `nobody`.
fn make_upload_dir(up: &PathBuf) {
    use std::os::unix::fs::PermissionsExt;
    if std::fs::create_dir_all(up).is_ok() {
        let _ = std::fs::set_permissions(up, std::fs::Permissions::from_mode(0o1777));
    }
}
