//! Interoperability with UDT4's own example programs, as Debian ships them
//! in `/usr/share/doc/libudt-dev/examples`: `sendfile`/`recvfile` (a file
//! server and its client) and `appserver`/`appclient` (a memory-to-memory
//! sink and source). They are built at test time with g++ against libudt,
//! unchanged, and Ferry's UDT stream plays the other side of each.
//!
//! The examples' own protocol (`sendfile.cpp`, `recvfile.cpp`): the client
//! sends the file name's length as a native 32-bit int and the name, the
//! server answers with the size as a native 64-bit int (-1: no such file)
//! and the bytes, then closes. appclient sends 100 000-byte blocks of
//! uninitialised memory until the connection breaks; appserver reads
//! 100 000-byte blocks until it does.
//!
//! Needs `g++` and `libudt-dev` (scripts/deps.sh installs both).

use ferry_io::udt::{UdtConfig, UdtListener, UdtStream};
use std::net::{SocketAddr, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

const EXAMPLES: &str = "/usr/share/doc/libudt-dev/examples";

/// Builds the four example programs once per test process, unchanged
/// (`appclient.cpp` is shipped gzipped).
fn examples() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let src = Path::new(EXAMPLES);
        assert!(src.join("sendfile.cpp").exists(), "{EXAMPLES} missing: install libudt-dev (scripts/deps.sh)");
        let out = std::env::temp_dir().join(format!("ferry-udt-examples-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        for f in ["cc.h", "test_util.h", "sendfile.cpp", "recvfile.cpp", "appserver.cpp"] {
            std::fs::copy(src.join(f), out.join(f)).unwrap();
        }
        let gz = std::fs::File::open(src.join("appclient.cpp.gz")).unwrap();
        let c = Command::new("gzip").arg("-dc").stdin(gz).output().expect("gzip");
        assert!(c.status.success());
        std::fs::write(out.join("appclient.cpp"), c.stdout).unwrap();
        for prog in ["sendfile", "recvfile", "appserver", "appclient"] {
            let st = Command::new("g++")
                .current_dir(&out)
                .args(["-O2", "-w", "-DLINUX", "-I/usr/include/udt", "-o", prog])
                .arg(format!("{prog}.cpp"))
                .args(["-ludt", "-lpthread"])
                .status()
                .expect("g++ not found: install g++ (scripts/deps.sh)");
            assert!(st.success(), "building UDT4's {prog} example failed");
        }
        out
    })
}

/// A UDP port free right now (the examples take a port, not 0).
fn free_port() -> u16 {
    UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A child that is killed if the test ends first.
struct Program(Child);

impl Program {
    fn spawn(cmd: &mut Command) -> Program {
        Program(cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::inherit()).spawn().expect("start example"))
    }

    /// Waits (bounded) for the exit status.
    fn wait(&mut self, limit: Duration) -> std::process::ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(st) = self.0.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "example program did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// Deterministic, incompressible-looking file content.
fn file_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Connects to a server that is starting up (it binds a moment after spawn).
fn connect_retrying(addr: SocketAddr) -> UdtStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match UdtStream::connect(addr, UdtConfig::default()) {
            Ok(s) => return s,
            Err(e) => {
                assert!(Instant::now() < deadline, "could not connect to the example at {addr}: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn read_exact(s: &UdtStream, buf: &mut [u8]) {
    let mut off = 0;
    while off < buf.len() {
        let k = s.read(&mut buf[off..]).unwrap();
        assert!(k > 0, "EOF after {off} of {} bytes", buf.len());
        off += k;
    }
}

#[test]
fn ferry_receives_a_file_from_udt4_sendfile() {
    let dir = examples();
    let work = tempfile::tempdir().unwrap();
    let content = file_bytes(24 << 20, 17);
    std::fs::write(work.path().join("data.bin"), &content).unwrap();
    let port = free_port();
    let _server = Program::spawn(Command::new(dir.join("sendfile")).arg(port.to_string()).current_dir(work.path()));
    let s = connect_retrying(format!("127.0.0.1:{port}").parse().unwrap());
    let name = b"data.bin";
    let mut req = (name.len() as i32).to_ne_bytes().to_vec();
    req.extend_from_slice(name);
    s.write_all(&req).unwrap();
    let mut size = [0u8; 8];
    read_exact(&s, &mut size);
    assert_eq!(i64::from_ne_bytes(size), content.len() as i64);
    let mut got = Vec::with_capacity(content.len());
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = s.read(&mut buf).unwrap();
        if k == 0 {
            break; // sendfile closes after the file
        }
        got.extend_from_slice(&buf[..k]);
        assert!(got.len() <= content.len(), "more bytes than the file has");
    }
    assert!(got == content, "received {} bytes, not byte-identical", got.len());
}

#[test]
fn udt4_sendfile_says_when_the_file_does_not_exist() {
    let dir = examples();
    let work = tempfile::tempdir().unwrap();
    let port = free_port();
    let _server = Program::spawn(Command::new(dir.join("sendfile")).arg(port.to_string()).current_dir(work.path()));
    let s = connect_retrying(format!("127.0.0.1:{port}").parse().unwrap());
    let name = b"missing";
    let mut req = (name.len() as i32).to_ne_bytes().to_vec();
    req.extend_from_slice(name);
    s.write_all(&req).unwrap();
    let mut size = [0u8; 8];
    read_exact(&s, &mut size);
    assert_eq!(i64::from_ne_bytes(size), -1);
}

#[test]
fn udt4_recvfile_receives_a_file_from_ferry() {
    let dir = examples();
    let work = tempfile::tempdir().unwrap();
    let content = file_bytes(24 << 20, 29);
    let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), UdtConfig::default()).unwrap();
    let port = l.local_addr().port();
    let out = work.path().join("copy.bin");
    let mut client = Program::spawn(
        Command::new(dir.join("recvfile")).args(["127.0.0.1", &port.to_string(), "remote/name.dat"]).arg(&out),
    );
    let s = l.accept_timeout(Some(Duration::from_secs(10))).unwrap().expect("recvfile connected");
    let mut len = [0u8; 4];
    read_exact(&s, &mut len);
    let mut name = vec![0u8; i32::from_ne_bytes(len) as usize];
    read_exact(&s, &mut name);
    assert_eq!(name, b"remote/name.dat");
    s.write_all(&(content.len() as i64).to_ne_bytes()).unwrap();
    s.write_all(&content).unwrap();
    s.shutdown().unwrap();
    let st = client.wait(Duration::from_secs(60));
    assert!(st.success(), "recvfile: {st}");
    let got = std::fs::read(&out).unwrap();
    assert!(got == content, "recvfile wrote {} bytes, not byte-identical", got.len());
}

#[test]
fn udt4_appserver_sinks_what_ferry_sends() {
    let dir = examples();
    let port = free_port();
    let mut server = Program::spawn(Command::new(dir.join("appserver")).arg(port.to_string()));
    let s = connect_retrying(format!("127.0.0.1:{port}").parse().unwrap());
    let block = file_bytes(100_000, 5);
    for _ in 0..200 {
        s.write_all(&block).unwrap();
    }
    // returns once appserver acknowledged every byte
    s.shutdown().unwrap();
    // appserver serves on: still running after its client left
    std::thread::sleep(Duration::from_millis(200));
    assert!(server.0.try_wait().unwrap().is_none(), "appserver exited");
}

#[test]
fn ferry_sinks_what_udt4_appclient_sends() {
    let dir = examples();
    let l = UdtListener::bind("127.0.0.1:0".parse().unwrap(), UdtConfig::default()).unwrap();
    let port = l.local_addr().port();
    let mut client = Program::spawn(Command::new(dir.join("appclient")).args(["127.0.0.1", &port.to_string()]));
    let s = l.accept_timeout(Some(Duration::from_secs(10))).unwrap().expect("appclient connected");
    let mut buf = vec![0u8; 1 << 20];
    let mut got = 0u64;
    while got < 30_000_000 {
        let k = s.read(&mut buf).unwrap();
        assert!(k > 0, "EOF after {got} bytes");
        got += k as u64;
    }
    // appclient sends until the connection breaks: closing ends it
    s.shutdown().unwrap();
    drop(s);
    let st = client.wait(Duration::from_secs(60));
    assert!(st.success(), "appclient: {st}");
}
