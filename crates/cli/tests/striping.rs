//! Striped transfers (issue 20, `docs/striping.md`): a Ferry front end
//! with two data nodes on loopback, driven by `globus-url-copy -stripe`,
//! by `ferry cp --stripe`, and facing the Globus striped server (a front
//! end with `-r node1,node2` and data nodes started with `-dn`).

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use support::*;

/// A `ferry serve --data-node` process.
struct DataNode {
    child: Child,
    addr: SocketAddr,
}

impl DataNode {
    fn start(root: &Path, secret: &Path, listen: &str) -> Self {
        Self::start_with(root, secret, listen, &[])
    }

    fn start_with(root: &Path, secret: &Path, listen: &str, extra: &[&str]) -> Self {
        let mut child = Command::new(ferry_bin())
            .args(["serve"])
            .arg(root)
            .args(["--data-node", "--listen", listen, "--node-secret"])
            .arg(secret)
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let addr = line.trim().rsplit_once(" on ").map(|(_, a)| a.parse().unwrap());
        let Some(addr) = addr else {
            let _ = child.kill();
            panic!("data node did not start: {line:?}");
        };
        Self { child, addr }
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for DataNode {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A Ferry striped server: two data nodes and a front end on one root.
struct Striped {
    nodes: Vec<DataNode>,
    front: FerryServer,
    _secret_dir: tempfile::TempDir,
    secret: PathBuf,
}

impl Striped {
    fn start(nodes: usize) -> Self {
        Self::start_with(nodes, &[])
    }

    /// With `node_args` given to every data node.
    fn start_with(nodes: usize, node_args: &[&str]) -> Self {
        Self::start_full(nodes, node_args, &[])
    }

    /// With `node_args` given to every data node, `front_args` to the front end.
    fn start_full(nodes: usize, node_args: &[&str], front_args: &[&str]) -> Self {
        let secret_dir = tempfile::tempdir().unwrap();
        let secret = secret_dir.path().join("node.secret");
        std::fs::write(&secret, "a-secret-long-enough-for-the-nodes\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
        let root = tempfile::tempdir().unwrap();
        let nodes: Vec<DataNode> = (0..nodes)
            .map(|_| DataNode::start_with(root.path(), &secret, &format!("127.0.0.1:{}", free_port()), node_args))
            .collect();
        let list = nodes.iter().map(|n| n.addr.to_string()).collect::<Vec<_>>().join(",");
        let mut args = vec!["--anonymous", "write", "--stripe-nodes", &list, "--node-secret", secret.to_str().unwrap()];
        args.extend_from_slice(front_args);
        let front = FerryServer::start_in(root, &[], &args);
        Self { nodes, front, _secret_dir: secret_dir, secret }
    }

    fn url(&self, path: &str) -> String {
        self.front.anon_url(path)
    }
}

fn same(a: &Path, b: &Path) {
    assert_eq!(sha256_file(a), sha256_file(b), "{} and {} differ", a.display(), b.display());
}

#[test]
fn globus_url_copy_stripe_puts_to_and_gets_from_the_ferry_striped_server() {
    let s = Striped::start(2);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 5_000_000, 20);
    let (ok, out) = guc(&["-stripe", "-dbg", "-vb", &format!("file://{}", src.display()), &s.url("/put.bin")]);
    assert!(ok, "{out}");
    // One address per data node in the striped passive reply.
    let spas = out.split("229-Entering Striped Passive Mode.").nth(1).and_then(|r| r.split("229 End").next());
    let lines = spas.map(|r| r.lines().filter(|l| l.starts_with(" 127,0,0,1,")).count());
    assert_eq!(lines, Some(2), "{out}");
    same(&src, &s.front.path("put.bin"));
    let back = local.path().join("back.bin");
    let (ok, out) = guc(&["-stripe", "-p", "2", "-vb", &s.url("/put.bin"), &format!("file://{}", back.display())]);
    assert!(ok, "{out}");
    same(&src, &back);
}

#[test]
fn globus_url_copy_stripe_third_party_deals_blocks_to_both_nodes() {
    let s = Striped::start(2);
    random_file(&s.front.path("a.bin"), 3_000_000, 24);
    let (ok, out) = guc(&["-stripe", "-p", "2", "-sbs", "262144", "-dbg", &s.url("/a.bin"), &s.url("/b.bin")]);
    assert!(ok, "{out}");
    same(&s.front.path("a.bin"), &s.front.path("b.bin"));
    assert!(out.contains("OPTS RETR StripeLayout=Blocked;BlockSize=262144;Parallelism=2,2,2;"), "{out}");
    // The destination's last markers: both stripes carried their blocks.
    let last: Vec<u64> = out
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Stripe Bytes Transferred: "))
        .map(|v| v.parse().unwrap())
        .collect();
    assert!(last.len() >= 2, "{out}");
    let tail = &last[last.len() - 2..];
    assert_eq!(tail.iter().sum::<u64>(), 3_000_000, "{out}");
    assert!(tail.iter().all(|b| *b > 1_000_000), "each stripe carries half: {tail:?}");
}

#[test]
fn a_data_node_serves_only_front_ends_that_prove_the_secret() {
    let s = Striped::start(1);
    let node = s.nodes[0].addr;
    // A stranger that skips the handshake, or guesses, is refused and cut off.
    for first in ["LISTEN 1 127.0.0.1 -", &format!("AUTH {} {}", "ab".repeat(32), "00".repeat(32))] {
        let c = TcpStream::connect(node).unwrap();
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut r = BufReader::new(c.try_clone().unwrap());
        let mut greeting = String::new();
        r.read_line(&mut greeting).unwrap();
        assert!(greeting.starts_with("FERRY-NODE 1 "), "{greeting}");
        (&c).write_all(format!("{first}\n").as_bytes()).unwrap();
        let mut rest = String::new();
        r.read_to_string(&mut rest).unwrap();
        assert!(rest.starts_with("DENIED "), "{rest}");
        assert!(!rest.contains("LISTENING"), "{rest}");
    }
    // A front end with another secret cannot open a striped data channel.
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.secret");
    std::fs::write(&wrong, "another-secret-of-enough-length").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).unwrap();
    let front = FerryServer::start_with(&[
        "--anonymous",
        "write",
        "--stripe-nodes",
        &node.to_string(),
        "--node-secret",
        wrong.to_str().unwrap(),
    ]);
    let ctrl = TcpStream::connect(front.addr).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut w = ctrl.try_clone().unwrap();
    let mut r = BufReader::new(ctrl);
    reply(&mut r);
    say(&mut w, &mut r, "USER anonymous");
    say(&mut w, &mut r, "PASS x");
    say(&mut w, &mut r, "MODE E");
    let spas = say(&mut w, &mut r, "SPAS");
    assert!(spas.starts_with("425") && spas.contains(&node.to_string()) && spas.contains("refused"), "{spas}");
}

#[test]
fn ferry_cp_stripe_uploads_downloads_and_sees_markers_per_stripe() {
    let s = Striped::start(2);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 3_000_000, 21);
    let cp = |from: &str, to: &str, extra: &[&str]| {
        let out = Command::new(ferry_bin()).args(["cp", "--stripe"]).args(extra).args([from, to]).output().unwrap();
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{text}");
        text
    };
    let text = cp(src.to_str().unwrap(), &s.url("/up.bin"), &["-p", "2", "--stripe-block", "65536"]);
    assert!(text.contains("over 2 stripe(s)"), "{text}");
    // The receiving front end sent a 112 per stripe (at least the first, zero ones).
    assert!(text.contains("per-stripe markers: ") && !text.contains("per-stripe markers: 0 "), "{text}");
    same(&src, &s.front.path("up.bin"));
    let back = local.path().join("back.bin");
    let text = cp(&s.url("/up.bin"), back.to_str().unwrap(), &[]);
    assert!(text.contains("over 2 stripe(s)"), "{text}");
    same(&src, &back);
}

#[test]
fn a_striped_download_resumes_only_the_missing_ranges() {
    let s = Striped::start(2);
    let local = tempfile::tempdir().unwrap();
    random_file(&s.front.path("big.bin"), 4_000_000, 22);
    // A download that stopped with the first 1.5 MB and 3-3.5 MB on disk.
    let dst = local.path().join("big.bin");
    let mut full = Vec::new();
    std::fs::File::open(s.front.path("big.bin")).unwrap().read_to_end(&mut full).unwrap();
    let mut partial = vec![0u8; full.len()];
    partial[..1_500_000].copy_from_slice(&full[..1_500_000]);
    partial[3_000_000..3_500_000].copy_from_slice(&full[3_000_000..3_500_000]);
    std::fs::write(&dst, &partial).unwrap();
    std::fs::write(local.path().join("big.bin.ferry-stripes"), "0-1500000,3000000-3500000").unwrap();
    let out = Command::new(ferry_bin()).args(["cp", "--stripe", &s.url("/big.bin")]).arg(&dst).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stderr);
    // Only the 2 MB missing were sent.
    assert!(text.contains("2000000 bytes over 2 stripe(s)"), "{text}");
    same(&s.front.path("big.bin"), &dst);
    assert!(!local.path().join("big.bin.ferry-stripes").exists());
}

/// Reads one reply (multi-line aware) from a raw control connection.
fn reply(r: &mut BufReader<TcpStream>) -> String {
    let mut all = String::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).unwrap();
        assert!(!line.is_empty(), "control connection closed after {all:?}");
        all.push_str(&line);
        if line.len() >= 4 && line.as_bytes()[3] == b' ' && all.as_bytes()[..3] == line.as_bytes()[..3] {
            return all;
        }
    }
}

fn say(w: &mut TcpStream, r: &mut BufReader<TcpStream>, line: &str) -> String {
    w.write_all(format!("{line}\r\n").as_bytes()).unwrap();
    reply(r)
}

/// The addresses of a `229` SPAS reply.
fn spas_addrs(spas: &str) -> Vec<SocketAddr> {
    spas.lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| {
            let n: Vec<u16> = l.trim().split(',').map(|x| x.parse().unwrap()).collect();
            format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
        })
        .collect()
}

/// `count` consecutive ports, all free now (the start of the range),
/// below the kernel's ephemeral range so no outgoing connection takes one.
fn free_port_range(count: u16) -> u16 {
    for _ in 0..200 {
        let base = 20000 + (rand::random::<u16>() % 12000);
        if (base..base + count).all(|p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()) {
            return base;
        }
    }
    panic!("no free port range of {count}");
}

#[test]
fn data_nodes_open_their_data_ports_in_the_passive_port_range() {
    let base = free_port_range(8);
    let range = format!("{base}-{}", base + 7);
    let s = Striped::start_with(2, &["--passive-ports", &range]);
    let ctrl = TcpStream::connect(s.front.addr).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut w = ctrl.try_clone().unwrap();
    let mut r = BufReader::new(ctrl);
    reply(&mut r);
    say(&mut w, &mut r, "USER anonymous");
    assert!(say(&mut w, &mut r, "PASS x").starts_with("230"));
    say(&mut w, &mut r, "TYPE I");
    say(&mut w, &mut r, "MODE E");
    for _ in 0..3 {
        let spas = say(&mut w, &mut r, "SPAS");
        let addrs = spas_addrs(&spas);
        assert_eq!(addrs.len(), 2, "{spas}");
        for a in addrs {
            assert!((base..=base + 7).contains(&a.port()), "{a} is outside {range}: {spas}");
        }
    }
    say(&mut w, &mut r, "QUIT");
    // And a striped copy runs through those ports both ways.
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 2_000_000, 5);
    let (ok, out, err) = ferry(&["cp", "--stripe", "--tcp-bs", "1M", src.to_str().unwrap(), &s.url("/ranged.bin")]);
    assert!(ok, "{out}{err}");
    same(&src, &s.front.path("ranged.bin"));
    let back = local.path().join("back.bin");
    let (ok, out, err) = ferry(&["cp", "--stripe", &s.url("/ranged.bin"), back.to_str().unwrap()]);
    assert!(ok, "{out}{err}");
    same(&src, &back);
}

#[test]
fn ferry_cp_stripe_over_ftps_runs_tls_on_every_stripe_connection() {
    let pki = TestPki::new();
    let tls = pki.serve_flags();
    let tls: Vec<&str> = tls.iter().map(String::as_str).collect();
    let s = Striped::start_full(2, &tls, &tls);
    let url = |p: &str| format!("ftps://localhost:{}{p}", s.front.addr.port());
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("src.bin");
    random_file(&src, 3_000_000, 31);
    let ca = pki.file("ca.pem");
    let cp = |from: &str, to: &str| {
        let (ok, out, err) = ferry(&["cp", "--stripe", "-p", "2", "--ca", &ca, from, to]);
        (ok, format!("{out}{err}"))
    };
    let (ok, text) = cp(src.to_str().unwrap(), &url("/secret.bin"));
    assert!(ok && text.contains("over 2 stripe(s)"), "{text}");
    same(&src, &s.front.path("secret.bin"));
    let back = local.path().join("back.bin");
    let (ok, text) = cp(&url("/secret.bin"), back.to_str().unwrap());
    assert!(ok && text.contains("over 2 stripe(s)"), "{text}");
    same(&src, &back);
    // The client logged in over TLS and so runs every data connection as a
    // TLS client (PROT P): a node answering in clear would fail the
    // handshake. And the nodes were asked for PROT P: without the
    // certificate they refuse, below.

    // Nodes without the certificate refuse PROT P with a reply that says why.
    let bare = Striped::start_full(2, &[], &tls);
    let url = format!("ftps://localhost:{}/x.bin", bare.front.addr.port());
    let (ok, text) = cp(src.to_str().unwrap(), &url);
    assert!(!ok && text.contains("no certificate"), "{text}");
}

#[test]
fn a_data_node_killed_mid_transfer_fails_it_with_a_reply_naming_the_node() {
    let mut s = Striped::start(2);
    let ctrl = TcpStream::connect(s.front.addr).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut w = ctrl.try_clone().unwrap();
    let mut r = BufReader::new(ctrl);
    reply(&mut r);
    say(&mut w, &mut r, "USER anonymous");
    assert!(say(&mut w, &mut r, "PASS x").starts_with("230"));
    say(&mut w, &mut r, "TYPE I");
    say(&mut w, &mut r, "MODE E");
    let spas = say(&mut w, &mut r, "SPAS");
    let addrs: Vec<SocketAddr> = spas
        .lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| {
            let n: Vec<u16> = l.trim().split(',').map(|x| x.parse().unwrap()).collect();
            format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
        })
        .collect();
    assert_eq!(addrs.len(), 2, "{spas}");
    w.write_all(b"STOR /victim.bin\r\n").unwrap();
    assert!(reply(&mut r).starts_with("150"));
    // A block to each stripe, no EOF: the transfer is under way.
    let mut data = Vec::new();
    for a in &addrs {
        let mut d = TcpStream::connect(a).unwrap();
        let mut h = vec![0u8];
        h.extend_from_slice(&1000u64.to_be_bytes());
        h.extend_from_slice(&(if a == &addrs[0] { 0u64 } else { 1000 }).to_be_bytes());
        d.write_all(&h).unwrap();
        d.write_all(&[7u8; 1000]).unwrap();
        data.push(d);
    }
    std::thread::sleep(Duration::from_millis(500));
    let victim = s.nodes[1].addr;
    s.nodes[1].kill();
    let text = loop {
        let line = reply(&mut r);
        if !line.starts_with('1') {
            break line;
        }
    };
    assert!(text.starts_with('4'), "{text}");
    assert!(text.contains(&format!("data node {victim}")), "the reply names the node: {text}");
    assert!(!s.front.path("victim.bin").exists(), "a failed upload is not committed");
}

/// The Globus striped server: data nodes started with `-dn` and a front
/// end with `-r node1,node2`, all anonymous on loopback, as nobody.
struct GlobusStriped {
    _children: Vec<PeerProcess>,
    port: u16,
    dir: tempfile::TempDir,
}

impl GlobusStriped {
    fn start(nodes: usize) -> Self {
        require("globus-gridftp-server");
        let dir = tempfile::tempdir().unwrap();
        chown_nobody(dir.path());
        let mut children = Vec::new();
        let mut list = Vec::new();
        let server = |args: &[String]| {
            PeerProcess::spawn(
                Command::new("setpriv")
                    .args(["--reuid=nobody", "--regid=nogroup", "--init-groups", "globus-gridftp-server"])
                    .args(["-c", "/dev/null", "-aa", "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1"])
                    .args(args)
                    .stdout(Stdio::null())
                    .stderr(Stdio::null()),
            )
        };
        for _ in 0..nodes {
            let p = free_port();
            children.push(server(&["-dn".into(), "-p".into(), p.to_string()]));
            wait_for_port(p);
            list.push(format!("127.0.0.1:{p}"));
        }
        let port = free_port();
        children.push(server(&["-p".into(), port.to_string(), "-r".into(), list.join(",")]));
        wait_for_port(port);
        Self { _children: children, port, dir }
    }

    fn url(&self, rel: &str) -> String {
        format!("ftp://127.0.0.1:{}{}/{}", self.port, self.dir.path().display(), rel)
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }
}

#[test]
fn third_party_between_the_ferry_and_globus_striped_servers_both_ways() {
    let ferry = Striped::start(2);
    let globus = GlobusStriped::start(2);
    random_file(&ferry.front.path("f2g.bin"), 6_000_000, 23);
    let (ok, out) = guc(&["-stripe", "-vb", &ferry.url("/f2g.bin"), &globus.url("f2g.bin")]);
    assert!(ok, "Ferry -> Globus: {out}");
    same(&ferry.front.path("f2g.bin"), &globus.path("f2g.bin"));
    let (ok, out) = guc(&["-stripe", "-vb", &globus.url("f2g.bin"), &ferry.url("/g2f.bin")]);
    assert!(ok, "Globus -> Ferry: {out}");
    same(&ferry.front.path("f2g.bin"), &ferry.front.path("g2f.bin"));
    // And driven by ferry cp --stripe, both ways.
    let cp = |from: &str, to: &str| {
        let out = Command::new(ferry_bin()).args(["cp", "--stripe", from, to]).output().unwrap();
        assert!(out.status.success(), "{from} -> {to}: {}", String::from_utf8_lossy(&out.stderr));
    };
    cp(&ferry.url("/f2g.bin"), &globus.url("cp.bin"));
    same(&ferry.front.path("f2g.bin"), &globus.path("cp.bin"));
    cp(&globus.url("cp.bin"), &ferry.url("/cp.bin"));
    same(&ferry.front.path("f2g.bin"), &ferry.front.path("cp.bin"));
    let _ = &ferry.secret;
}

/// A MODE E block header.
fn header(descriptor: u8, count: u64, offset: u64) -> Vec<u8> {
    let mut h = vec![descriptor];
    h.extend_from_slice(&count.to_be_bytes());
    h.extend_from_slice(&offset.to_be_bytes());
    h
}

#[test]
fn after_a_node_failed_an_upload_resumes_only_the_missing_ranges_once_it_is_back() {
    let mut s = Striped::start(2);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("r.bin");
    random_file(&src, 2_000_000, 25);
    let data = std::fs::read(&src).unwrap();
    let ctrl = TcpStream::connect(s.front.addr).unwrap();
    ctrl.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let mut w = ctrl.try_clone().unwrap();
    let mut r = BufReader::new(ctrl);
    reply(&mut r);
    say(&mut w, &mut r, "USER anonymous");
    say(&mut w, &mut r, "PASS x");
    say(&mut w, &mut r, "TYPE I");
    say(&mut w, &mut r, "MODE E");
    let spas = say(&mut w, &mut r, "SPAS");
    let addrs: Vec<SocketAddr> = spas
        .lines()
        .filter(|l| l.starts_with(' '))
        .map(|l| {
            let n: Vec<u16> = l.trim().split(',').map(|x| x.parse().unwrap()).collect();
            format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
        })
        .collect();
    say(&mut w, &mut r, "ALLO 2000000");
    w.write_all(b"STOR /r.bin\r\n").unwrap();
    assert!(reply(&mut r).starts_with("150"));
    // Stripe 0 gets its whole share (the first MiB, Blocked layout) and
    // its EOF; stripe 1 only part of its share when its node dies.
    let mut d0 = TcpStream::connect(addrs[0]).unwrap();
    d0.write_all(&header(0, 1 << 20, 0)).unwrap();
    d0.write_all(&data[..1 << 20]).unwrap();
    d0.write_all(&header(0x48, 0, 1)).unwrap();
    let mut d1 = TcpStream::connect(addrs[1]).unwrap();
    d1.write_all(&header(0, 100_000, 1 << 20)).unwrap();
    d1.write_all(&data[1 << 20..(1 << 20) + 100_000]).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let victim = s.nodes[1].addr;
    s.nodes[1].kill();
    let text = loop {
        let line = reply(&mut r);
        if !line.starts_with('1') {
            break line;
        }
    };
    assert!(text.contains(&format!("data node {victim}")), "{text}");
    drop((d0, d1));
    // The node comes back on its address; the copy is run again.
    s.nodes[1] = DataNode::start(s.front.root.path(), &s.secret, &victim.to_string());
    let out = Command::new(ferry_bin()).args(["cp", "--stripe"]).arg(&src).arg(s.url("/r.bin")).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{text}");
    same(&src, &s.front.path("r.bin"));
    // Stripe 0's MiB was on disk and recorded: only the rest was sent.
    assert!(text.contains(&format!("{} bytes over 2 stripe(s)", 2_000_000 - (1 << 20))), "{text}");
}

#[test]
fn ferry_cp_stripe_to_and_from_the_globus_striped_server() {
    let globus = GlobusStriped::start(2);
    let local = tempfile::tempdir().unwrap();
    let src = local.path().join("up.bin");
    random_file(&src, 4_000_000, 26);
    let cp = |from: &str, to: &str| {
        let out = Command::new(ferry_bin()).args(["cp", "--stripe", "-p", "2", from, to]).output().unwrap();
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "{from} -> {to}: {text}");
        text
    };
    // Upload: a connection set to each of Globus's two data nodes.
    let text = cp(src.to_str().unwrap(), &globus.url("up.bin"));
    assert!(text.contains("over 2 stripe(s)"), "{text}");
    // Globus's front end sends a 112 per stripe.
    assert!(!text.contains("per-stripe markers: 0 "), "{text}");
    same(&src, &globus.path("up.bin"));
    // Download: two listeners here, one per Globus data node.
    let back = local.path().join("back.bin");
    let text = cp(&globus.url("up.bin"), back.to_str().unwrap());
    assert!(text.contains("4000000 bytes over 2 stripe(s)"), "{text}");
    same(&src, &back);
}

#[test]
fn a_data_node_confines_paths_under_its_root_whatever_the_front_end_asks() {
    use ferry_proto::node::{FrontHandshake, NodeEvent, NodeRequest, SendRequest};
    let s = Striped::start(1);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "not yours").unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), s.front.path("link")).unwrap();
    let secret = std::fs::read_to_string(&s.secret).unwrap();
    let c = TcpStream::connect(s.nodes[0].addr).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut r = BufReader::new(c.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut hs = FrontHandshake::new([3; 32]);
    let auth = hs.on_greeting(secret.trim().as_bytes(), line.trim()).unwrap();
    (&c).write_all(format!("{auth}\n").as_bytes()).unwrap();
    line.clear();
    r.read_line(&mut line).unwrap();
    hs.on_welcome(secret.trim().as_bytes(), line.trim()).unwrap();
    // A sink that would take whatever the node sends.
    let sink = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    let dotdot = format!("/../../..{}", outside.path().join("secret.txt").display());
    // A link out of the root is refused; `..` clamps at the root, where no
    // such file exists.
    for (id, path, why) in [(1, "/link".to_string(), "Escapes"), (2, dotdot, "NotFound")] {
        let req = NodeRequest::Send(SendRequest {
            id,
            to,
            streams: 1,
            buffer: None,
            stripe: 0,
            count: 1,
            layout: ferry_proto::stripe::StripeLayout::Partitioned,
            len: 9,
            window_offset: 0,
            done: None,
            private: false,
            path,
        });
        (&c).write_all(format!("{req}\n").as_bytes()).unwrap();
        let ev = loop {
            line.clear();
            r.read_line(&mut line).unwrap();
            match NodeEvent::parse(line.trim()).unwrap() {
                NodeEvent::Progress { .. } => continue,
                ev => break ev,
            }
        };
        assert!(matches!(&ev, NodeEvent::Failed { id: i, text } if *i == id && text.contains(why)), "{ev:?}");
    }
}
