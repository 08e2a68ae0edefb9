//! The session state machine driven line by line, with a scripted "driver"
//! standing in for the I/O layer: no sockets, no files, no clock.

use ferry_proto::command::Command;
use ferry_proto::facts::{FileFacts, FileKind};
use ferry_proto::session::{
    Access, Action, AnonymousAccess, DataEndpoint, FileDone, FileOp, FsError, Grant, ListFormat, LoginRequest,
    SessionConfig, TlsIdentity, TransferError, TransferKind, TransferOutcome,
};
use ferry_proto::{Reply, ReplyCode, Session, VirtualPath};
use proptest::prelude::*;

const PEER: &str = "192.0.2.7:40000";

/// Drives a session the way the server does, with canned I/O outcomes:
/// every file exists and every operation succeeds unless the path
/// contains "missing".
struct Harness {
    s: Session,
    /// What the "handshake" reports after AUTH TLS.
    identity: TlsIdentity,
    /// Whether the last transfer asked for protected data connections.
    protected: Option<bool>,
}

impl Harness {
    fn new(anonymous: AnonymousAccess) -> Self {
        let cfg = SessionConfig { anonymous, max_login_attempts: 3, ..SessionConfig::default() };
        Self::with(cfg)
    }

    fn with(cfg: SessionConfig) -> Self {
        Self { s: Session::new(cfg, PEER.parse().unwrap()), identity: TlsIdentity::default(), protected: None }
    }

    fn logged_in() -> Self {
        let mut h = Self::new(AnonymousAccess::Off);
        assert_eq!(h.code("USER alice"), 331);
        assert_eq!(h.code("PASS right"), 230);
        h
    }

    /// Sends a line and returns the final replies (after the driver did
    /// whatever the session asked).
    fn send(&mut self, line: &str) -> Vec<Reply> {
        let action = self.s.handle(Command::parse(line.as_bytes()));
        self.drive(action)
    }

    fn drive(&mut self, action: Action) -> Vec<Reply> {
        match action {
            Action::Reply(r) | Action::Close(r) => vec![r],
            Action::Login(LoginRequest::Password { user, password }) => {
                let grant = (password == "right").then_some(Grant { user, access: Access::ReadWrite });
                let next = self.s.login_result(grant);
                self.drive(next)
            }
            Action::Login(LoginRequest::Certificate { user, .. }) => {
                let next = self.s.login_result(Some(Grant { user, access: Access::ReadOnly }));
                self.drive(next)
            }
            Action::StartTls(r) => {
                self.s.tls_started(self.identity.clone());
                vec![r]
            }
            Action::Login(LoginRequest::Anonymous { access, .. }) => {
                let next = self.s.login_result(Some(Grant { user: "anonymous".into(), access }));
                self.drive(next)
            }
            Action::File(op) => {
                let missing = format!("{op:?}").contains("missing");
                let result = if missing {
                    Err(FsError::NotFound)
                } else {
                    Ok(match op {
                        FileOp::Size(_) => FileDone::Size(42),
                        FileOp::ModTime(_) => FileDone::ModTime(0),
                        FileOp::Facts(p) => FileDone::Facts(facts(p.file_name().unwrap_or("/"))),
                        FileOp::StatListing(_) => FileDone::Listing(vec![facts("a")]),
                        FileOp::Checksum { .. } => FileDone::Checksum("0123abcd".into()),
                        _ => FileDone::Done,
                    })
                };
                vec![self.s.file_result(result)]
            }
            Action::Passive(_) => vec![self.s.passive_result(Ok("198.51.100.1:50000".parse().unwrap()))],
            Action::Transfer(req) => {
                self.protected = Some(req.protected);
                let mut out = vec![self.s.transfer_started("x", None, false)];
                let outcome = if req.path.as_str().contains("missing") {
                    TransferOutcome::Failed(TransferError::File(FsError::NotFound))
                } else {
                    TransferOutcome::Complete { bytes: 1 }
                };
                out.extend(self.s.transfer_finished(&req.path, outcome));
                out
            }
            Action::AbortTransfer | Action::AbortFileOp => vec![],
            // The driver's answer, standing in for a started profiler.
            Action::Profile(_) => vec![Reply::new(ReplyCode::OK, "profiling")],
        }
    }

    fn code(&mut self, line: &str) -> u16 {
        self.send(line).last().map(|r| r.code.get()).unwrap_or(0)
    }
}

fn facts(name: &str) -> FileFacts {
    FileFacts {
        name: name.into(),
        kind: FileKind::File,
        size: 42,
        modified: 0,
        mode: 0o644,
        uid: 0,
        gid: 0,
        nlink: 1,
        unique: (1, 2),
    }
}

#[test]
fn site_profile_goes_to_the_driver_only_after_login() {
    let mut t = Harness::new(AnonymousAccess::Off);
    assert_eq!(t.code("SITE PROFILE START"), 530);
    let mut t = Harness::logged_in();
    assert_eq!(t.code("SITE PROFILE START 200 PERF"), 200);
    assert_eq!(t.code("SITE PROFILE STOP"), 200);
    assert_eq!(t.code("SITE PROFILE START 10"), 501);
    assert_eq!(t.code("SITE PROFILE"), 501);
}

#[test]
fn login_sequence() {
    let mut h = Harness::new(AnonymousAccess::Off);
    assert_eq!(h.s.greeting().code.get(), 220);
    assert_eq!(h.code("PASS x"), 503);
    assert_eq!(h.code("PWD"), 530);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS wrong"), 530);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("PWD"), 257);
    assert_eq!(h.code("USER bob"), 530, "no user switch");
}

#[test]
fn too_many_failed_logins_close_the_connection() {
    let mut h = Harness::new(AnonymousAccess::Off);
    for _ in 0..2 {
        h.send("USER alice");
        assert_eq!(h.code("PASS wrong"), 530);
    }
    h.send("USER alice");
    let action = h.s.handle(Command::parse(b"PASS wrong"));
    let Action::Login(_) = action else { panic!("{action:?}") };
    match h.s.login_result(None) {
        Action::Close(r) => assert_eq!(r.code.get(), 421),
        other => panic!("{other:?}"),
    }
}

#[test]
fn anonymous_access() {
    let mut off = Harness::new(AnonymousAccess::Off);
    off.send("USER anonymous");
    let r = off.send("PASS guest@");
    assert_eq!(r[0].code.get(), 530);
    assert!(r[0].text().contains("Anonymous login is not allowed"));

    let mut ro = Harness::new(AnonymousAccess::Read);
    ro.send("USER ftp");
    assert_eq!(ro.code("PASS x"), 230);
    assert_eq!(ro.code("PASV"), 227);
    assert_eq!(ro.code("RETR f"), 226);
    for cmd in ["STOR f", "APPE f", "DELE f", "MKD d", "RMD d", "RNFR f", "SITE CHMOD 644 f", "MFMT 20260101000000 f"] {
        assert_eq!(ro.code(cmd), 550, "{cmd}");
    }
}

#[test]
fn globus_mapping_is_anonymous() {
    // The Globus client library's default user (a URL without one).
    let mut ro = Harness::new(AnonymousAccess::Read);
    assert_eq!(ro.code("USER :globus-mapping:"), 331);
    let r = ro.send("PASS x");
    assert_eq!(r[0].code.get(), 230, "{r:?}");
    assert_eq!(ro.s.user().map(|g| g.user.as_str()), Some("anonymous"));
    assert_eq!(ro.code("STOR f"), 550, "read-only like any anonymous login");

    let mut off = Harness::new(AnonymousAccess::Off);
    off.send("USER :globus-mapping:");
    let r = off.send("PASS x");
    assert_eq!(r[0].code.get(), 530);
    assert!(r[0].text().contains("Anonymous login is not allowed"), "{r:?}");
}

#[test]
fn rename_sequence() {
    let mut h = Harness::logged_in();
    assert_eq!(h.code("RNTO b"), 503);
    assert_eq!(h.code("RNFR a"), 350);
    assert_eq!(h.code("RNTO b"), 250);
    assert_eq!(h.code("RNTO c"), 503, "a rename is used once");
    assert_eq!(h.code("RNFR a"), 350);
    assert_eq!(h.code("NOOP"), 200);
    assert_eq!(h.code("RNTO c"), 503, "another command in between forgets RNFR");
    assert_eq!(h.code("RNFR a"), 350);
    assert_eq!(h.code("GARBAGE"), 500);
    assert_eq!(h.code("RNTO c"), 503, "so does a bad line");
    assert_eq!(h.code("RNFR missing"), 550);
    assert_eq!(h.code("RNTO c"), 503);
}

#[test]
fn data_channel_and_rest_sequencing() {
    let mut h = Harness::logged_in();
    assert_eq!(h.code("RETR f"), 425, "no PASV/PORT yet");
    assert_eq!(h.code("REST 100"), 350);
    assert_eq!(h.code("PASV"), 227);
    let action = h.s.handle(Command::parse(b"RETR f"));
    let Action::Transfer(req) = action else { panic!("{action:?}") };
    assert_eq!(req.endpoint, DataEndpoint::Passive);
    assert_eq!(req.kind, TransferKind::Retrieve);
    assert!(matches!(req.restart, Some(ferry_proto::command::RestArg::Offset(100))));
    h.s.transfer_started("f", None, false);
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
    // Stream mode consumes the setup and the restart offset.
    assert_eq!(h.code("RETR f"), 425);
    assert_eq!(h.code("PORT 192,0,2,7,200,10"), 200);
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR f")) else { panic!() };
    assert!(req.restart.is_none());
    assert_eq!(req.endpoint, DataEndpoint::Active("192.0.2.7:51210".parse().unwrap()));
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
}

#[test]
fn bounce_protection_and_epsv_all() {
    let mut h = Harness::logged_in();
    assert_eq!(h.code("PORT 10,0,0,1,200,10"), 501, "third address");
    assert_eq!(h.code("PORT 192,0,2,7,0,25"), 501, "privileged port");
    assert_eq!(h.code("EPRT |1|192.0.2.7|50000|"), 200);
    assert_eq!(h.code("EPSV ALL"), 200);
    assert_eq!(h.code("PASV"), 503);
    assert_eq!(h.code("PORT 192,0,2,7,200,10"), 503);
    assert_eq!(h.code("EPSV"), 229);
    assert_eq!(h.code("EPSV 2"), 522, "IPv4 control connection (RFC 2428 §3)");
}

#[test]
fn transfer_failures_and_abort() {
    let mut h = Harness::logged_in();
    h.send("PASV");
    assert_eq!(h.code("RETR missing"), 550);
    // ABOR during a transfer: the transfer ends with 426, the ABOR with 226.
    h.send("PASV");
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR big")) else { panic!() };
    assert!(h.s.is_transferring());
    assert_eq!(h.s.handle(Command::parse(b"ABOR")), Action::AbortTransfer);
    let r = h.s.handle(Command::parse(b"CWD x"));
    assert!(matches!(r, Action::Reply(ref r) if r.code.get() == 503), "{r:?}");
    let replies = h.s.transfer_finished(&req.path, TransferOutcome::Failed(TransferError::Aborted));
    let codes: Vec<u16> = replies.iter().map(|r| r.code.get()).collect();
    assert_eq!(codes, [426, 226]);
    assert!(!h.s.is_transferring());
    assert_eq!(h.code("ABOR"), 225, "nothing to abort now");
}

#[test]
fn cwd_pwd_and_confinement() {
    let mut h = Harness::logged_in();
    assert_eq!(h.code("CWD a/b"), 250);
    let r = h.send("PWD");
    assert_eq!(r[0].lines[0], "\"/a/b\" is the current directory.");
    assert_eq!(h.code("CDUP"), 250);
    assert_eq!(h.s.cwd(), &VirtualPath::root().resolve("/a").unwrap());
    assert_eq!(h.code("CWD missing"), 550);
    assert_eq!(h.s.cwd().as_str(), "/a", "failed CWD keeps the directory");
    // `..` at the root stays at the root (POSIX, and the Globus server).
    assert_eq!(h.code("CWD ../../.."), 250);
    assert_eq!(h.s.cwd(), &VirtualPath::root());
    assert_eq!(h.code("CDUP"), 250);
    assert_eq!(h.code("CWD /../.."), 250);
    let r = h.send("PWD");
    assert_eq!(r[0].lines[0], "\"/\" is the current directory.");
    let r = h.send("MLST ../../x");
    assert!(r[0].lines[0].contains("Listing /x"), "{r:?}");
    assert_eq!(h.code("CWD a"), 250);
    let r = h.send("MKD we\"ird");
    assert_eq!(r[0].lines[0], "\"/a/we\"\"ird\" created.");
}

/// Replies the differential sweep against the Globus server
/// (`crates/cli/tests/conformance.rs`, docs/conformance.md) brought in
/// line with it.
#[test]
fn replies_as_the_globus_server_gives_them() {
    let mut h = Harness::new(AnonymousAccess::Off);
    assert_eq!(h.code("SITE HELP"), 214, "before login");
    assert_eq!(h.code("PWD"), 530);
    let mut h = Harness::logged_in();
    assert_eq!(h.code("HELP"), 214);
    assert_eq!(h.code("HELP RETR"), 214);
    assert_eq!(h.code("HELP retr"), 214);
    assert_eq!(h.code("HELP XPWD"), 214);
    assert_eq!(h.code("HELP FOO"), 502);
    assert_eq!(h.code("HELP LANG"), 214);
    assert!(h.send("HELP SITE")[0].lines.iter().any(|l| l.contains("SITE WHOAMI")));
    assert_eq!(h.code("LANG"), 200);
    assert_eq!(h.code("LANG en"), 200);
    assert_eq!(h.code("LANG EN-US"), 200);
    assert_eq!(h.code("LANG FR"), 504);
    let r = h.send("SITE WHOAMI");
    assert_eq!((r[0].code.get(), r[0].lines[0].as_str()), (200, "alice"));
    assert_eq!(h.code("EPSV 3"), 522);
    assert_eq!(h.code("EPSV x"), 501);
    assert_eq!(h.code("EPRT |3|x|1|"), 522);
}

#[test]
fn replies_to_simple_commands() {
    let mut h = Harness::logged_in();
    for (cmd, code) in [
        ("SYST", 215),
        ("NOOP", 200),
        ("FEAT", 211),
        ("HELP", 214),
        ("SITE HELP", 214),
        ("STAT", 211),
        ("STAT .", 213),
        ("TYPE I", 200),
        ("TYPE A", 200),
        ("MODE S", 200),
        ("STRU F", 200),
        ("SIZE f", 213),
        ("MDTM f", 213),
        ("MLST f", 250),
        ("ALLO 100", 200),
        ("OPTS UTF8 ON", 200),
        ("OPTS MLST type;size;", 200),
        ("ACCT x", 202),
        ("AUTH TLS", 431),
        ("PBSZ 0", 503),
        ("SITE FOO", 500),
        ("STOU", 502),
        ("QUIT", 221),
    ] {
        assert_eq!(h.code(cmd), code, "{cmd}");
    }
}

/// The Globus command extensions Globus clients send (issue 11), with the
/// replies the Globus server gives: 250 for the SITE commands.
#[test]
fn globus_extensions() {
    let mut h = Harness::logged_in();
    assert_eq!(h.code("SITE SETDISKSTACK file"), 250);
    assert_eq!(h.code("SITE SETDISKSTACK file:opt=1"), 250);
    for bad in ["SITE SETDISKSTACK bogus", "SITE SETDISKSTACK file,gsi", "SITE SETDISKSTACK posix"] {
        let r = h.send(bad);
        assert_eq!(r[0].code.get(), 504, "{bad}");
        assert!(r[0].text().contains("only disk stack is 'file'"), "{r:?}");
    }
    // SITE UTIME asks the driver to set the time, read as UTC.
    let action = h.s.handle(Command::parse(b"SITE UTIME 20200102030405 d/f"));
    let Action::File(FileOp::Utime { path, unix_secs }) = action.clone() else { panic!("{action:?}") };
    assert_eq!((path.as_str(), unix_secs), ("/d/f", 1_577_934_245));
    assert_eq!(h.s.file_result(Ok(FileDone::Done)).code.get(), 250);
    assert_eq!(h.code("SITE UTIME 20201301000000 f"), 501, "month 13");
    assert_eq!(h.code("SITE UTIME 2020 f"), 501);
    assert_eq!(h.code("SITE UTIME 20200102030405 missing"), 550);
    // SITE CHGRP hands the group to the driver, which decides.
    let action = h.s.handle(Command::parse(b"SITE CHGRP users ../f"));
    let Action::File(FileOp::Chgrp { path, group }) = action.clone() else { panic!("{action:?}") };
    assert_eq!((path.as_str(), group.as_str()), ("/f", "users"));
    let refused = FsError::Refused("group root is not one this server may set".into());
    let r = h.s.file_result(Err(refused));
    assert_eq!(r.code.get(), 550);
    assert!(r.text().contains("/f: group root is not one"), "{r:?}");
    // MLSR is a listing: a data transfer of the whole tree.
    h.send("PASV");
    let action = h.s.handle(Command::parse(b"MLSR tree"));
    let Action::Transfer(req) = action.clone() else { panic!("{action:?}") };
    assert_eq!(req.path.as_str(), "/tree");
    assert!(matches!(req.kind, TransferKind::List { format: ListFormat::MachineRecursive, .. }), "{req:?}");
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
    assert_eq!(h.code("MLSR"), 425, "needs a data connection like MLSD");

    // Read-only users may not change anything.
    let mut ro = Harness::new(AnonymousAccess::Read);
    ro.send("USER anonymous");
    ro.send("PASS x");
    assert_eq!(ro.code("SITE UTIME 20200102030405 f"), 550);
    assert_eq!(ro.code("SITE CHGRP users f"), 550);
    assert_eq!(ro.code("SITE SETDISKSTACK file"), 250, "a setting, not a change");
}

/// Transport negotiation (issue 15, docs/transports.md): FEAT lists the
/// offered transports, `TPRT` selects one, an unknown one gets a 5xx and
/// the next transfer still runs over TCP; `SITE SETNETSTACK` names a
/// Globus XIO stack, accepted when it is one Ferry has.
#[test]
fn transports_are_listed_selected_and_refused() {
    use ferry_proto::transport::TransportName;
    let mut h = Harness::logged_in();
    assert!(feat_lines(&mut h).contains("\n TRANSPORTS tcp\n"));
    let r = h.send("TPRT quic");
    assert_eq!(r[0].code.get(), 504);
    assert!(r[0].text().contains("stay on tcp"), "{r:?}");
    assert_eq!(h.code("TPRT"), 501);
    assert_eq!(h.code("TPRT tcp"), 200);
    assert_eq!(h.code("TPRT TCP"), 200, "names are case-insensitive");
    assert_eq!(h.code("PASV"), 227);
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR f")) else { panic!() };
    assert_eq!(req.channel.transport, TransportName::TCP);
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
    assert_eq!(h.code("SITE SETNETSTACK tcp"), 250);
    assert_eq!(h.code("SITE SETNETSTACK tcp:nodelay=1"), 250);
    for bad in ["SITE SETNETSTACK udt", "SITE SETNETSTACK gsi,tcp", "SITE SETNETSTACK bogus"] {
        assert_eq!(h.code(bad), 504, "{bad}");
    }
    // A server whose default is another transport starts there, and
    // TPRT tcp takes the session back.
    let udt = TransportName::parse("udt").unwrap();
    let cfg =
        SessionConfig { transports: vec![TransportName::TCP, udt], default_transport: udt, ..SessionConfig::default() };
    let mut h = Harness::with(cfg);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.s.data_transport(), udt);
    assert!(feat_lines(&mut h).contains(" TRANSPORTS tcp;udt"));
    assert_eq!(h.code("TPRT tcp"), 200);
    assert_eq!(h.s.data_transport(), TransportName::TCP);
    // Before login, like every transfer parameter: 530.
    let mut fresh = Harness::new(AnonymousAccess::Off);
    assert_eq!(fresh.code("TPRT tcp"), 530);
}

/// `OPTS TPRT Rate=N;`: the client's measured path rate reaches the
/// transfer's channel plan (the server's UDT sender starts at half of it);
/// `Rate=0;` forgets it; nonsense is a 501 and keeps the last value.
#[test]
fn opts_tprt_rate_reaches_the_channel_plan() {
    let mut h = Harness::logged_in();
    assert_eq!(h.s.path_rate(), None);
    assert_eq!(h.code("OPTS TPRT Rate=12500000;"), 200);
    assert_eq!(h.s.path_rate(), Some(12_500_000));
    for bad in ["OPTS TPRT Rate=fast;", "OPTS TPRT Rate=-1;", "OPTS TPRT Speed=1;", "OPTS TPRT Rate=99999999999999999;"]
    {
        assert_eq!(h.code(bad), 501, "{bad}");
    }
    assert_eq!(h.s.path_rate(), Some(12_500_000));
    assert_eq!(h.code("PASV"), 227);
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR f")) else { panic!() };
    assert_eq!(req.channel.path_rate, Some(12_500_000));
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
    assert_eq!(h.code("OPTS TPRT Rate=0;"), 200);
    assert_eq!(h.s.path_rate(), None);
    // Before login, like every transfer parameter.
    let mut fresh = Harness::new(AnonymousAccess::Off);
    assert_ne!(fresh.code("OPTS TPRT Rate=1000;"), 200);
}

/// QUIC is TLS itself (issue 19): refused with 534 on a clear control
/// channel, and a session whose default it is stays on TCP until PROT P.
#[test]
fn quic_needs_a_tls_control_channel_and_private_data() {
    use ferry_proto::transport::TransportName;
    let quic = TransportName::parse("quic").unwrap();
    let cfg = SessionConfig {
        transports: vec![TransportName::TCP, quic],
        default_transport: quic,
        ..SessionConfig::default()
    };
    let mut h = Harness::with(cfg);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.s.data_transport(), TransportName::TCP, "clear: TCP whatever the default");
    let r = h.send("TPRT quic");
    assert_eq!(r[0].code.get(), 534, "{r:?}");
    assert!(r[0].text().contains("AUTH TLS"), "{r:?}");
    assert_eq!(h.code("SITE SETNETSTACK quic"), 534);
    assert_eq!(h.code("PASV"), 227);
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR f")) else { panic!() };
    assert_eq!(req.channel.transport, TransportName::TCP);
}

/// A server whose default is QUIC gives it only to sessions that selected
/// it: a standard FTPS client (curl, lftp) never sends TPRT, cannot speak
/// QUIC, and gets TCP under PROT P (issue 19). Configured otherwise
/// (`default_transport_unasked`), every private session gets the default.
#[test]
fn a_quic_default_goes_only_to_sessions_that_select_it() {
    use ferry_proto::transport::TransportName;
    let quic = TransportName::parse("quic").unwrap();
    let cfg = |unasked| SessionConfig {
        transports: vec![TransportName::TCP, quic],
        default_transport: quic,
        default_transport_unasked: unasked,
        ..tls_config()
    };
    let private = |h: &mut Harness| {
        assert_eq!(h.code("AUTH TLS"), 234);
        assert_eq!(h.code("PBSZ 0"), 200);
        assert_eq!(h.code("PROT P"), 200);
        assert_eq!(h.code("USER alice"), 331);
        assert_eq!(h.code("PASS right"), 230);
    };
    let mut h = Harness::with(cfg(false));
    private(&mut h);
    assert_eq!(h.s.data_transport(), TransportName::TCP, "never asked: FTPS over TCP");
    assert_eq!(h.code("PASV"), 227);
    let Action::Transfer(req) = h.s.handle(Command::parse(b"RETR f")) else { panic!() };
    assert_eq!(req.channel.transport, TransportName::TCP);
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
    let generation = h.s.data_generation();
    assert_eq!(h.code("TPRT quic"), 200);
    assert_eq!(h.s.data_transport(), quic, "selected");
    assert_ne!(h.s.data_generation(), generation, "cached TCP channels are not reused for QUIC");
    let mut h = Harness::with(cfg(false));
    private(&mut h);
    assert_eq!(h.code("SITE SETNETSTACK quic"), 250);
    assert_eq!(h.s.data_transport(), quic, "selected the Globus way");
    let mut h = Harness::with(cfg(true));
    private(&mut h);
    assert_eq!(h.s.data_transport(), quic, "configured to give the default to every private session");
}

/// `DCAU S NAME` (third-party QUIC): accepted only on a TLS control
/// channel of a server that can verify other servers' certificates;
/// `DCAU N` forgets the name; elsewhere it stays 504 as before.
#[test]
fn dcau_s_names_the_data_channels_peer_only_where_it_can_be_checked() {
    let mut h = Harness::with(SessionConfig { peer_certificates: true, ..tls_config() });
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("DCAU S other.example"), 504, "clear control channel");
    let mut h = Harness::with(SessionConfig { peer_certificates: true, ..tls_config() });
    assert_eq!(h.code("AUTH TLS"), 234);
    assert_eq!(h.code("PBSZ 0"), 200);
    assert_eq!(h.code("PROT P"), 200);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    let generation = h.s.data_generation();
    assert_eq!(h.code("DCAU S other.example"), 200);
    assert_eq!(h.s.data_peer(), Some("other.example"));
    assert_ne!(h.s.data_generation(), generation, "no cached channel outlives a new peer");
    assert_eq!(h.code("DCAU N"), 200);
    assert_eq!(h.s.data_peer(), None);
    assert_eq!(h.code("DCAU A"), 504);
    let mut h = Harness::with(tls_config());
    assert_eq!(h.code("AUTH TLS"), 234);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("DCAU S other.example"), 504, "no trust store for other servers");
    assert_eq!(h.s.data_peer(), None);
}

/// `OPTS MLST` selects the facts of later MLST replies and MLSD lines
/// for this session (RFC 3659 §7.9), as the Globus server does: names in
/// any case, unknown ones ignored, FEAT marking the selected ones.
#[test]
fn opts_mlst_selects_the_facts_per_session() {
    use ferry_proto::facts::FactSet;
    let mut h = Harness::logged_in();
    let mlst = |h: &mut Harness| h.send("MLST f")[0].lines[1].clone();
    assert!(mlst(&mut h).starts_with(" Type=file;Size="), "all facts by default");
    let r = h.send("OPTS MLST size;TYPE;bogus;");
    assert_eq!((r[0].code.get(), r[0].lines[0].as_str()), (200, "MLST OPTS Type;Size;"));
    assert_eq!(mlst(&mut h), format!(" Type=file;Size={}; /f", facts("f").size));
    assert!(feat_lines(&mut h).contains(" MLST Type*;Size*;Modify;Perm;UNIX.mode;"), "FEAT marks the selection");
    assert_eq!(h.code("PORT 192,0,2,7,200,10"), 200);
    let req = match h.s.handle(Command::parse(b"MLSD .")) {
        Action::Transfer(req) => req,
        other => panic!("{other:?}"),
    };
    assert_eq!(req.mlst_facts, FactSet::select(&["type", "size"]), "MLSD lines carry the selection");
    h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 1 });
    let r = h.send("OPTS MLST bogus;");
    assert_eq!((r[0].code.get(), r[0].lines[0].as_str()), (200, "MLST OPTS "));
    assert_eq!(mlst(&mut h), "  /f", "no facts: a space, then the name");
    assert_eq!(h.code("OPTS MLST modify;"), 200);
    assert!(mlst(&mut h).starts_with(" Modify="));
    // A new session starts with every fact again.
    let mut other = Harness::logged_in();
    assert!(mlst(&mut other).starts_with(" Type=file;Size="));
}

/// FEAT lists exactly what is implemented (and SITE HELP names the SITE
/// commands, where the Globus client library looks for them).
#[test]
fn feat_is_exactly_what_is_implemented() {
    let mut h = Harness::logged_in();
    let feat = feat_lines(&mut h);
    let want = [
        "Extensions supported",
        " BATCH RETR,STOR,SYNC,FACTS,STREAM,STREAM-STOR",
        " CKSM ADLER32;CRC32C;MD5;SHA1;SHA256;SHA512;XXH128;",
        " EPRT",
        " EPSV",
        " ERET",
        " ESTO",
        " MDTM",
        " MFMT",
        " MLSR",
        " MLST Type*;Size*;Modify*;Perm*;UNIX.mode*;UNIX.uid*;UNIX.gid*;Unique*;",
        " PARALLEL",
        " PASV AllowDelayed;",
        " REST STREAM",
        " SBUF",
        " SITE PARTIAL",
        " SIZE",
        " SPAS",
        " SPOR",
        " TRANSPORTS tcp",
        " TVFS",
        " UTF8",
        "End.",
    ];
    assert_eq!(feat, want.join("\n"));
    let help = h.send("SITE HELP")[0].to_string();
    for site in ["CHMOD", "CHGRP", "UTIME", "SETDISKSTACK", "RETRBUFSIZE", "STORBUFSIZE"] {
        assert!(help.contains(&format!(" {site}")), "SITE HELP lacks {site}:\n{help}");
    }
    assert!(help.contains(" MLSR"), "{help}");
}

#[test]
fn garbage_floods_end_the_session() {
    let mut h = Harness::logged_in();
    let mut closed = false;
    for _ in 0..25 {
        if let Action::Close(r) = h.s.handle(Command::parse(b"\x01\x02garbage")) {
            assert_eq!(r.code.get(), 421);
            closed = true;
            break;
        }
    }
    assert!(closed);
}

fn arb_line() -> impl Strategy<Value = String> {
    let verbs = prop::sample::select(vec![
        "USER",
        "PASS",
        "CWD",
        "CDUP",
        "PWD",
        "PASV",
        "EPSV",
        "PORT",
        "EPRT",
        "TYPE",
        "MODE",
        "STRU",
        "RETR",
        "STOR",
        "APPE",
        "REST",
        "RNFR",
        "RNTO",
        "DELE",
        "MKD",
        "RMD",
        "LIST",
        "NLST",
        "MLSD",
        "MLST",
        "SIZE",
        "MDTM",
        "ABOR",
        "STAT",
        "HELP",
        "NOOP",
        "FEAT",
        "OPTS",
        "SITE",
        "ALLO",
        "AUTH",
        "PBSZ",
        "PROT",
        "QUIT",
        "XYZ",
        "ERET",
        "ESTO",
        "CKSM",
        "SPAS",
        "SPOR",
        "DCAU",
        "SBUF",
        "MFMT",
        "MLSR",
        "SITE UTIME 20200102030405",
        "SITE CHGRP users",
        "SITE SETDISKSTACK",
    ]);
    let args = prop::sample::select(vec![
        "",
        " ",
        " alice",
        " right",
        " wrong",
        " a",
        " missing",
        " ../..",
        " /x/y",
        " I",
        " A",
        " E",
        " S",
        " 100",
        " 0-10,20-30",
        " 192,0,2,7,200,10",
        " 10,0,0,1,1,1",
        " |1|192.0.2.7|5000|",
        " ALL",
        " UTF8 ON",
        " RETR Parallelism=4,4,4;",
        " HELP",
        " CHMOD 755 f",
        " P 0 10 f",
        " MD5 0 -1 f",
        " N",
    ]);
    (verbs, args).prop_map(|(v, a)| format!("{v}{a}"))
}

proptest! {
    /// Any sequence of commands, with every driver request answered,
    /// yields well-formed replies and never panics; after QUIT or a close
    /// nothing more is sent.
    #[test]
    fn any_command_sequence_is_answered(lines in prop::collection::vec(arb_line(), 1..40)) {
        let mut h = Harness::new(AnonymousAccess::Read);
        for line in lines {
            let action = h.s.handle(Command::parse(line.as_bytes()));
            let closing = matches!(action, Action::Close(_));
            for r in h.drive(action) {
                prop_assert!((100..600).contains(&r.code.get()));
                let wire = r.to_string();
                prop_assert!(wire.ends_with("\r\n"));
                let last_prefix = format!("{} ", r.code);
                prop_assert!(wire.lines().last().unwrap().starts_with(&last_prefix));
            }
            if closing {
                break;
            }
        }
    }
}

mod gridftp {
    use super::*;
    use ferry_proto::command::RestArg;
    use ferry_proto::session::{DataEndpoint, Direction, MarkerPlan, PassiveKind, Window};

    fn transfer(h: &mut Harness, line: &str) -> ferry_proto::session::TransferRequest {
        match h.s.handle(Command::parse(line.as_bytes())) {
            Action::Transfer(req) => req,
            other => panic!("{line}: {other:?}"),
        }
    }

    fn finish(h: &mut Harness, req: &ferry_proto::session::TransferRequest) -> Vec<u16> {
        h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 1 }).iter().map(|r| r.code.get()).collect()
    }

    #[test]
    fn mode_e_channels_are_cached_per_direction_and_dropped_on_change() {
        let mut h = Harness::logged_in();
        assert_eq!(h.code("MODE E"), 200);
        assert_eq!(h.code("OPTS RETR Parallelism=4,4,4;"), 200);
        assert_eq!(h.code("PORT 192,0,2,7,200,10"), 200);
        let g = h.s.data_generation();
        let r1 = transfer(&mut h, "RETR a");
        assert_eq!((r1.channel.parallelism, r1.channel.reuse, r1.channel.generation), (4, false, g));
        assert_eq!(finish(&mut h, &r1), [226]);
        // Same direction, same setup: reuse, and the setup persists (no
        // new PORT needed in MODE E).
        let r2 = transfer(&mut h, "RETR b");
        assert!(r2.channel.reuse);
        assert_eq!(h.s.transfer_started("b", None, true).code.get(), 125);
        finish(&mut h, &r2);
        // A listing counts as the same direction (the server sends).
        let r3 = transfer(&mut h, "MLSD .");
        assert!(r3.channel.reuse);
        finish(&mut h, &r3);
        // A failed transfer leaves nothing to reuse.
        let r4 = transfer(&mut h, "RETR c");
        h.s.transfer_finished(&r4.path, TransferOutcome::Failed(TransferError::ConnectionLost("x".into())));
        assert!(!transfer(&mut h, "RETR d").channel.reuse);
        h.s.transfer_finished(&VirtualPath::root(), TransferOutcome::Complete { bytes: 0 });
        // MODE, PORT, PASV, DCAU each start a new generation.
        for cmd in ["MODE S", "MODE E", "PORT 192,0,2,7,200,11", "DCAU N"] {
            let before = h.s.data_generation();
            h.send(cmd);
            assert!(h.s.data_generation() > before, "{cmd}");
        }
    }

    #[test]
    fn in_mode_e_the_sender_connects() {
        let mut h = Harness::logged_in();
        h.send("MODE E");
        h.send("PASV");
        assert_eq!(h.code("RETR a"), 503, "RETR needs PORT in MODE E");
        assert!(matches!(transfer(&mut h, "STOR a").endpoint, DataEndpoint::Passive));
        h.s.transfer_finished(&VirtualPath::root(), TransferOutcome::Complete { bytes: 0 });
        h.send("PORT 192,0,2,7,200,10");
        assert_eq!(h.code("STOR a"), 503, "STOR needs PASV in MODE E");
    }

    #[test]
    fn delayed_passive_as_gfal2_uses_it() {
        let mut h = Harness::logged_in();
        assert_eq!(h.code("OPTS PASV AllowDelayed=1;"), 200);
        let r = h.send("PASV");
        assert_eq!(r[0].to_string(), "200 Passive delayed.\r\n");
        let req = transfer(&mut h, "RETR x");
        assert_eq!(req.endpoint, DataEndpoint::DelayedPassive(PassiveKind::Pasv));
        let reply = h.s.delayed_passive_reply(PassiveKind::Pasv, "127.0.0.1:4660".parse().unwrap());
        assert_eq!(reply.to_string(), "127 Entering Passive Mode (127,0,0,1,18,52).\r\n");
        h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
        // Still delayed (sticky) until a PORT.
        assert_eq!(h.code("EPSV"), 200);
        let req = transfer(&mut h, "STOR y");
        let reply = h.s.delayed_passive_reply(PassiveKind::Epsv, "127.0.0.1:4660".parse().unwrap());
        assert_eq!(reply.to_string(), "129 Entering Extended Passive Mode (|||4660|)\r\n");
        h.s.transfer_finished(&req.path, TransferOutcome::Complete { bytes: 0 });
        h.send("PORT 192,0,2,7,200,10");
        assert_eq!(h.code("PASV"), 227, "PORT ended delayed passive");
    }

    #[test]
    fn spas_and_spor() {
        let mut h = Harness::logged_in();
        let r = h.send("SPAS");
        // One header, one address, one end line, and no '(' (globus-url-copy
        // counts addresses as newlines minus two).
        assert_eq!(r[0].to_string(), "229-Entering Striped Passive Mode.\r\n 198,51,100,1,195,80\r\n229 End\r\n");
        assert_eq!(h.code("SPOR 192,0,2,7,200,10"), 200);
        assert_eq!(h.code("SPOR 192,0,2,7,200,10 192,0,2,7,200,11"), 501, "one stripe only");
    }

    #[test]
    fn eret_esto_and_rest_ranges() {
        let mut h = Harness::logged_in();
        h.send("MODE E");
        h.send("PORT 192,0,2,7,200,10");
        assert_eq!(h.code("REST 0-100,200-300"), 350);
        let r = transfer(&mut h, "ERET P 1000 5000 /f");
        assert_eq!(r.window, Some(Window { offset: 1000, length: Some(5000) }));
        assert_eq!(r.restart, Some(RestArg::Ranges(ferry_proto::RangeSet::parse("0-100,200-300").unwrap())));
        h.s.transfer_finished(&r.path, TransferOutcome::Complete { bytes: 0 });
        h.send("PASV");
        let r = transfer(&mut h, "ESTO A 77 /g");
        assert_eq!((r.kind.direction(), r.window), (Direction::Receive, Some(Window { offset: 77, length: None })));
        h.s.transfer_finished(&r.path, TransferOutcome::Complete { bytes: 0 });
        // Stream mode takes a prefix range as an offset, refuses the rest.
        h.send("MODE S");
        h.send("PASV");
        h.send("REST 0-4096");
        assert_eq!(transfer(&mut h, "RETR f").restart, Some(RestArg::Offset(4096)));
        h.s.transfer_finished(&VirtualPath::root(), TransferOutcome::Complete { bytes: 0 });
        h.send("PASV");
        h.send("REST 0-10,20-30");
        assert_eq!(h.code("RETR f"), 554);
    }

    #[test]
    fn markers_are_planned_for_receivers_and_on_request_for_senders() {
        let mut h = Harness::logged_in();
        h.send("MODE E");
        h.send("PASV");
        let r = transfer(&mut h, "STOR f");
        assert_eq!(r.markers, MarkerPlan { perf_secs: Some(5), restart_secs: Some(5) });
        h.s.transfer_finished(&r.path, TransferOutcome::Complete { bytes: 0 });
        assert_eq!(h.code("TREV PERF 2"), 200);
        assert_eq!(h.code("TREV RESTART 0"), 200);
        assert_eq!(h.code("TREV FOO 1"), 504);
        let r = transfer(&mut h, "STOR f");
        assert_eq!(r.markers, MarkerPlan { perf_secs: Some(2), restart_secs: None });
        h.s.transfer_finished(&r.path, TransferOutcome::Complete { bytes: 0 });
        h.send("PORT 192,0,2,7,200,10");
        assert_eq!(transfer(&mut h, "RETR f").markers, MarkerPlan::default(), "senders send none by default");
        h.s.transfer_finished(&VirtualPath::root(), TransferOutcome::Complete { bytes: 0 });
        assert_eq!(h.code("OPTS RETR markers=3;"), 200);
        assert_eq!(transfer(&mut h, "RETR f").markers, MarkerPlan { perf_secs: Some(3), restart_secs: None });
    }

    #[test]
    fn buffers_dcau_cksm_and_opts() {
        let mut h = Harness::logged_in();
        for cmd in ["SBUF 1048576", "SITE RETRBUFSIZE 4194304", "SITE STORBUFSIZE 4194304", "SITE BUFSIZE 65536"] {
            assert_eq!(h.code(cmd), 200, "{cmd}");
        }
        assert_eq!(h.s.buffer_size(), Some(65536));
        assert_eq!(h.code("SBUF 0"), 501);
        assert_eq!(h.code("SBUF 99999999999"), 501);
        assert_eq!(h.code("DCAU N"), 200);
        let r = h.send("DCAU A");
        assert_eq!(r[0].code.get(), 504);
        assert!(r[0].text().contains("only DCAU N"), "{:?}", r[0]);
        let r = h.send("CKSM MD5 0 -1 f");
        assert_eq!(r[0].to_string(), "213 0123abcd\r\n", "one line, bare hex: globus-url-copy reads it with %s");
        assert_eq!(h.code("CKSM CRC32 0 -1 f"), 504);
        assert_eq!(h.code("OPTS RETR Parallelism=0,0,0;"), 501);
        assert_eq!(h.code("OPTS RETR Bogus=1;"), 501);
        assert_eq!(h.code("OPTS RETR StripeLayout=Blocked;BlockSize=1048576;"), 200);
        assert_eq!(h.code("OPTS PASV AllowDelayed=7;"), 501);
        let feat = h.send("FEAT")[0].to_string();
        for f in [
            " CKSM ADLER32;CRC32C;MD5;SHA1;SHA256;SHA512;XXH128;",
            " PARALLEL",
            " ERET",
            " ESTO",
            " SPAS",
            " SPOR",
            " SBUF",
            " PASV AllowDelayed;",
            " REST STREAM",
        ] {
            assert!(feat.contains(&format!("{f}\r\n")), "FEAT lacks {f}:\n{feat}");
        }
        assert!(!feat.contains("DCAU"), "DCAU A/S are not implemented, so FEAT must not offer DCAU");
    }
}

fn tls_config() -> SessionConfig {
    SessionConfig { tls_available: true, ..SessionConfig::default() }
}

fn feat_lines(h: &mut Harness) -> String {
    h.send("FEAT").iter().flat_map(|r| r.lines.clone()).collect::<Vec<_>>().join("\n")
}

#[test]
fn auth_tls_pbsz_prot_sequence() {
    let mut h = Harness::with(tls_config());
    let feat = feat_lines(&mut h);
    assert!(feat.contains(" AUTH TLS") && feat.contains(" PBSZ") && feat.contains(" PROT"), "{feat}");
    assert_eq!(h.code("PBSZ 0"), 503, "PBSZ before AUTH");
    assert_eq!(h.code("PROT P"), 503, "PROT before AUTH");
    assert_eq!(h.code("AUTH GSSAPI"), 504);
    assert_eq!(h.code("AUTH TLS"), 234);
    assert!(h.s.is_tls());
    assert_eq!(h.code("AUTH TLS"), 503, "twice");
    assert_eq!(h.code("PROT P"), 503, "PROT before PBSZ");
    assert_eq!(h.code("PBSZ 1024"), 200);
    assert_eq!(h.send("PBSZ 0")[0].text(), "PBSZ=0");
    assert_eq!(h.code("PROT S"), 536);
    assert_eq!(h.code("PROT E"), 536);
    assert_eq!(h.code("PROT X"), 504);
    assert_eq!(h.code("CCC"), 534);
    let generation = h.s.data_generation();
    assert_eq!(h.code("PROT P"), 200);
    assert_ne!(h.s.data_generation(), generation, "cached MODE E channels are not reused across PROT");
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("PASV"), 227);
    assert_eq!(h.code("RETR f"), 226);
    assert_eq!(h.protected, Some(true));
    assert_eq!(h.code("PROT C"), 200);
    assert_eq!(h.code("PASV"), 227);
    assert_eq!(h.code("LIST"), 226);
    assert_eq!(h.protected, Some(false));
}

#[test]
fn without_a_certificate_there_is_no_tls() {
    let mut h = Harness::new(AnonymousAccess::Off);
    let feat = feat_lines(&mut h);
    assert!(!feat.contains("AUTH") && !feat.contains("PBSZ") && !feat.contains("PROT"), "{feat}");
    let r = h.send("AUTH TLS");
    assert_eq!(r[0].code.get(), 431);
    assert!(r[0].text().contains("no TLS certificate"), "{}", r[0].text());
    assert_eq!(h.code("PROT C"), 200);
    assert_eq!(h.code("PROT P"), 503);
    assert_eq!(h.code("CCC"), 533);
}

#[test]
fn require_tls_and_protected_data() {
    let cfg = SessionConfig { require_tls: true, require_protected_data: true, ..tls_config() };
    let mut h = Harness::with(cfg);
    let r = h.send("USER alice");
    assert_eq!(r[0].code.get(), 530);
    assert!(r[0].text().contains("AUTH TLS"), "{}", r[0].text());
    assert_eq!(h.code("PASS right"), 503);
    assert_eq!(h.code("AUTH TLS"), 234);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("AUTH TLS"), 503);
    assert_eq!(h.code("PASV"), 227);
    assert_eq!(h.code("RETR f"), 521, "PROT C data refused");
    assert_eq!(h.code("PBSZ 0"), 200);
    assert_eq!(h.code("PROT C"), 534);
    assert_eq!(h.code("PROT P"), 200);
    assert_eq!(h.code("PASV"), 227);
    assert_eq!(h.code("RETR f"), 226);
}

#[test]
fn certificate_login_by_mapping() {
    let mut h = Harness::with(tls_config());
    h.identity = TlsIdentity { subject: Some("/O=Grid/CN=Alice".into()), users: vec!["alice".into()] };
    assert_eq!(h.code("AUTH TLS"), 234);
    let r = h.send("USER bob");
    assert_eq!(r[0].code.get(), 530);
    assert!(r[0].text().contains("mapped to alice, not to bob"), "{}", r[0].text());
    let r = h.send("USER alice");
    assert_eq!(r[0].code.get(), 232);
    assert!(r[0].text().contains("certificate"), "{}", r[0].text());
    assert_eq!(h.code("PASS anything"), 202, "a PASS that follows is superfluous");
    assert_eq!(h.code("PWD"), 257);

    // A verified certificate that is not mapped leaves password logins.
    let mut h = Harness::with(tls_config());
    h.identity = TlsIdentity { subject: Some("/CN=Nobody".into()), users: vec![] };
    assert_eq!(h.code("AUTH TLS"), 234);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
}

/// A long file operation (a CKSM of a huge file) keeps the session alive:
/// NOOP and STAT are answered, ABOR stops it (426 for the CKSM, then 226),
/// and other commands wait for the driver.
#[test]
fn noop_and_abor_during_a_checksum() {
    let mut h = Harness::logged_in();
    let op = h.s.handle(Command::parse(b"CKSM MD5 0 -1 huge.bin"));
    assert!(matches!(op, Action::File(FileOp::Checksum { .. })), "{op:?}");
    assert_eq!(h.s.handle(Command::parse(b"NOOP")), Action::Reply(Reply::new(ReplyCode::OK, "NOOP ok.")));
    assert!(matches!(h.s.handle(Command::parse(b"STAT")), Action::Reply(r) if r.code.get() == 211));
    assert_eq!(h.s.handle(Command::parse(b"ABOR")), Action::AbortFileOp);
    assert!(h.s.file_abort_requested());
    let r = h.s.file_result(Err(FsError::Aborted));
    assert_eq!(r.code.get(), 426);
    assert_eq!(h.s.file_abort_reply().map(|r| r.code.get()), Some(226));
    assert_eq!(h.s.file_abort_reply(), None);
    assert_eq!(h.code("NOOP"), 200);
}

/// ALLO and ESTO are bounded by the largest file the server stores; MFMT
/// reports the time the file system took.
#[test]
fn sizes_are_bounded_and_mfmt_reports_what_was_set() {
    let cfg = SessionConfig { max_file_size: 1 << 20, ..SessionConfig::default() };
    let mut h = Harness::with(cfg);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert_eq!(h.code("ALLO 1048576"), 200);
    assert_eq!(h.code("ALLO 1048577"), 552);
    assert_eq!(h.code("ESTO A 1048576 x"), 552);
    let op = h.s.handle(Command::parse(b"MFMT 19000101000000 t.txt"));
    assert!(matches!(op, Action::File(FileOp::SetModTime { .. })));
    let r = h.s.file_result(Ok(FileDone::ModTime(0)));
    assert_eq!(r.lines[0], "Modify=19700101000000; /t.txt");
}

#[test]
fn site_partial_reports_the_record() {
    let mut h = Harness::logged_in();
    let op = h.s.handle(Command::parse(b"SITE PARTIAL run.nc"));
    assert_eq!(op, Action::File(FileOp::Partial(VirtualPath::root().resolve("/run.nc").unwrap())));
    let facts = ferry_proto::session::PartialFacts {
        size: Some(10),
        ranges: ferry_proto::RangeSet::parse("0-4,6-8").unwrap(),
        xxh128: "ab".repeat(16),
    };
    let r = h.s.file_result(Ok(FileDone::Partial(facts)));
    assert_eq!(r.to_string(), format!("213 Size=10;Ranges=0-4,6-8;XXH128={}; /run.nc\r\n", "ab".repeat(16)));
    assert!(h.send("FEAT")[0].lines.iter().any(|l| l == " SITE PARTIAL"));
}

/// Encrypted UDT (issue 17, docs/udt.md "Encryption after PROT P"):
/// advertised in FEAT by a server with a certificate, accepted only on a
/// TLS control channel, and cleared by plain `TPRT udt` or Globus's `SITE
/// SETNETSTACK udt` (whose PROT P data the transport then refuses).
#[test]
fn tprt_udt_aes_gcm_needs_tls_and_is_cleared_by_plain_udt() {
    use ferry_proto::transport::TransportName;
    let udt = TransportName::parse("udt").unwrap();
    let cfg = || SessionConfig { transports: vec![TransportName::TCP, udt], ..tls_config() };
    let mut h = Harness::with(cfg());
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert!(feat_lines(&mut h).contains("\n TPRT udt:aes-gcm\n"));
    assert_eq!(h.code("TPRT udt:aes-gcm"), 534, "no TLS session to key from");
    assert!(!h.s.udt_sealed());
    assert_eq!(h.code("TPRT udt:chacha"), 504);
    let mut h = Harness::with(cfg());
    assert_eq!(h.code("AUTH TLS"), 234);
    assert_eq!(h.code("PBSZ 0"), 200);
    assert_eq!(h.code("PROT P"), 200);
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    let generation = h.s.data_generation();
    assert_eq!(h.code("TPRT udt:aes-gcm"), 200);
    assert_eq!(h.s.data_transport(), udt);
    assert!(h.s.udt_sealed());
    assert_ne!(h.s.data_generation(), generation);
    assert_eq!(h.code("TPRT udt"), 200);
    assert!(!h.s.udt_sealed(), "plain udt: PROT P data is refused, never clear");
    assert_eq!(h.code("TPRT udt:aes-gcm"), 200);
    assert_eq!(h.code("SITE SETNETSTACK udt"), 250);
    assert!(!h.s.udt_sealed());
    assert_eq!(h.code("TPRT udt:aes-gcm"), 200);
    assert_eq!(h.code("TPRT tcp"), 200);
    assert!(!h.s.udt_sealed(), "only while udt is the transport");
    // A server without a certificate neither advertises nor accepts it.
    let mut h = Harness::with(SessionConfig { transports: vec![TransportName::TCP, udt], ..SessionConfig::default() });
    assert_eq!(h.code("USER alice"), 331);
    assert_eq!(h.code("PASS right"), 230);
    assert!(!feat_lines(&mut h).contains("aes-gcm"));
    assert_eq!(h.code("TPRT udt:aes-gcm"), 504);
}

/// A server whose default is UDT gives a private session that never
/// selected a transport TCP with TLS (curl and lftp under `ferry serve
/// --data-transport udt` work), as a QUIC default does; a session that
/// selected UDT keeps it (and its PROT P data is encrypted only with
/// `TPRT udt:aes-gcm`, refused otherwise); `--data-transport-for-all`
/// gives UDT to every session.
#[test]
fn a_udt_default_gives_unasked_private_sessions_tcp() {
    use ferry_proto::transport::TransportName;
    let udt = TransportName::parse("udt").unwrap();
    let cfg = |unasked| SessionConfig {
        transports: vec![TransportName::TCP, udt],
        default_transport: udt,
        default_transport_unasked: unasked,
        ..tls_config()
    };
    let private = |h: &mut Harness| {
        assert_eq!(h.code("AUTH TLS"), 234);
        assert_eq!(h.code("USER alice"), 331);
        assert_eq!(h.code("PASS right"), 230);
        assert_eq!(h.s.data_transport(), udt, "PROT C: the default");
        assert_eq!(h.code("PBSZ 0"), 200);
        assert_eq!(h.code("PROT P"), 200);
    };
    let mut h = Harness::with(cfg(false));
    private(&mut h);
    assert_eq!(h.s.data_transport(), TransportName::TCP, "never asked: FTPS over TCP");
    assert_eq!(h.code("TPRT udt"), 200);
    assert_eq!(h.s.data_transport(), udt);
    assert!(!h.s.udt_sealed());
    assert_eq!(h.code("TPRT udt:aes-gcm"), 200);
    assert!(h.s.udt_sealed());
    let mut h = Harness::with(cfg(true));
    private(&mut h);
    assert_eq!(h.s.data_transport(), udt, "--data-transport-for-all");
}
