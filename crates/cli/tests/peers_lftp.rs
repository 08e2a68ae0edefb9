//! lftp mirrors a tree of nested directories (names with spaces and UTF-8)
//! up to `ferry serve` and back down; every file arrives identical.

mod support;
use support::*;

#[test]
fn mirror_tree_up_and_back_down() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    let files: [(&str, u64); 7] = [
        ("readme.txt", 120),
        ("données/été 2026/φ-data.bin", 3 << 20),
        ("données/été 2026/empty", 0),
        ("with space/a b c.dat", 70_001),
        ("with space/deeper/還有/日本語.bin", 1 << 20),
        ("x/y/z/w/deep.bin", 4097),
        ("émoji 🚀/file", 9),
    ];
    for (i, (path, size)) in files.iter().enumerate() {
        random_file(&tree.join(path), *size, i as u64);
    }
    std::fs::create_dir_all(tree.join("empty dir")).unwrap();
    let back = local.path().join("back");
    let script = format!(
        "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 20; set ftp:ssl-allow no; \
         open -u {},{} ftp://{}; \
         mirror -R --no-perms '{}' '/mirror'; \
         mirror '/mirror' '{}'; \
         quit",
        ALICE.0,
        ALICE.1,
        server.addr,
        tree.display(),
        back.display()
    );
    let out = lftp().args(["-c", &script]).output().unwrap();
    assert!(
        out.status.success(),
        "lftp failed: {}\n{}\nserver log:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        server.log_text()
    );
    let want = tree_digest(&tree);
    assert_eq!(tree_digest(&server.path("mirror")), want, "tree on the server");
    assert_eq!(tree_digest(&back), want, "tree mirrored back");
}

#[test]
fn mirror_with_permissions_uses_site_chmod() {
    let server = FerryServer::start();
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("t");
    random_file(&tree.join("script.sh"), 100, 1);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tree.join("script.sh"), std::fs::Permissions::from_mode(0o750)).unwrap();
    let script = format!(
        "set cmd:fail-exit yes; set net:max-retries 1; set ftp:ssl-allow no; open -u {},{} ftp://{}; mirror -R '{}' /p; quit",
        ALICE.0,
        ALICE.1,
        server.addr,
        tree.display()
    );
    let out = lftp().args(["-c", &script]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = std::fs::metadata(server.path("p/script.sh")).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o750);
}
