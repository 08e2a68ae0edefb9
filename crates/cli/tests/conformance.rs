//! Differential conformance sweep: the same short raw control dialogues
//! against `ferry serve` and the real Globus GridFTP server
//! (`globus-gridftp-server`, started as in `edges.rs`), compared reply by
//! reply. Each step of the table says how the two must relate: the same
//! codes, the same codes and bytes, the same first digit, or a deliberate
//! difference that `docs/conformance.md` explains (and that is asserted
//! too, so a change on either side shows up here).
//!
//! Paths: Globus sees the host's file system (its anonymous user starts in
//! `/nonexistent`), Ferry its served root; every path in the table is
//! written `{d}/...`, `{d}` being the same fixture directory in each
//! server's namespace.

mod support;
use std::net::SocketAddr;
use std::path::Path;
use support::*;

/// How the two servers' replies to one step must relate.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// The same reply codes, every one (clients branch on them).
    C,
    /// The same codes and the same first reply line or data bytes
    /// (checksums, sizes, file contents).
    T,
    /// The same first digit of every reply: both succeed or both fail
    /// alike; the exact code is each server's own.
    K,
    /// The same codes and the same MLSx fact names in the MLST reply's
    /// fact line or in every MLSD/MLSR line (the values are each server's own):
    /// what an `OPTS MLST` selection must change.
    F,
    /// A deliberate difference: Ferry's codes, Globus's codes, and why
    /// (docs/conformance.md).
    D(&'static str, &'static str, &'static str),
}
use Want::*;

struct Case {
    name: &'static str,
    /// Whether the dialogue starts logged in (Ferry as alice, Globus as
    /// anonymous); the steps of a case without do their own USER/PASS.
    login: bool,
    steps: &'static [(&'static str, Want)],
}

/// What one server answered to one step.
#[derive(Debug, Default)]
struct Seen {
    /// The codes of every reply, `>`-joined (`150>226`).
    codes: String,
    /// The first line of the first reply.
    first: String,
    /// What the data connection carried, for a download or listing.
    data: Option<Vec<u8>>,
    /// The distinct fact-name lists (`type;size`) of the MLST fact line
    /// or of the lines the data connection carried.
    facts: std::collections::BTreeSet<String>,
}

/// The fact names of MLSx lines (`facts SP name`, the MLST reply's
/// leading space already taken off), lower case, one `a;b` list per distinct
/// shape (`""` for a line with no facts).
fn fact_names<'a>(lines: impl Iterator<Item = &'a str>) -> std::collections::BTreeSet<String> {
    lines
        .map(|l| l.trim_end_matches(['\r', '\n']))
        .filter(|l| !l.is_empty())
        .map(|l| {
            let facts = l.split_once(' ').map_or("", |(f, _)| f);
            facts
                .split(';')
                .filter(|f| !f.is_empty())
                .map(|f| f.split('=').next().unwrap().to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join(";")
        })
        .collect()
}

/// Commands that use the data connection a preceding PASV/EPSV opened.
const DATA_VERBS: [&str; 9] = ["RETR", "STOR", "APPE", "ESTO", "ERET", "LIST", "NLST", "MLSD", "MLSR"];

/// The same files in each server's `d/`: `f` (5 bytes), `e` (empty), `t`
/// (three lines ending in LF), each with a fixed mtime; `sub/g` (a
/// directory that is not empty), `empty/`.
fn fixture(root: &Path) {
    let d = root.join("d");
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.join("sub")).unwrap();
    std::fs::create_dir_all(d.join("empty")).unwrap();
    std::fs::write(d.join("f"), b"12345").unwrap();
    std::fs::write(d.join("e"), b"").unwrap();
    std::fs::write(d.join("sub/g"), b"x").unwrap();
    std::fs::write(d.join("t"), b"a\nb\nc\n").unwrap();
    let when = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_590_969_600);
    for file in ["f", "e", "t"] {
        std::fs::File::options().write(true).open(d.join(file)).unwrap().set_modified(when).unwrap();
    }
}

/// Runs one case's steps on a fresh login and returns what was seen.
/// After a 4xx/5xx reply a `NOOP` marks the end of that reply: the Globus
/// server echoes some bad arguments with their CRLF inside the reply
/// text, which reads as a stray extra line; everything up to the `200`
/// belongs to the step. (Only after errors: a NOOP between RNFR and RNTO
/// would itself be a step.)
fn dialogue(addr: SocketAddr, user: Option<(&str, &str)>, dir: &str, steps: &[(&str, Want)]) -> Vec<Seen> {
    let mut c = RawControl::connect(addr);
    if let Some(user) = user {
        c.login(user);
    }
    let mut passive: Option<SocketAddr> = None;
    let mut out = Vec::new();
    for (step, _) in steps {
        // `{long}`: a path of 10,000 bytes, over any control line limit.
        let line = step.replace("{d}", dir).replace("{long}", &"x".repeat(10_000));
        let verb = line.split(' ').next().unwrap_or("");
        let mut data = None;
        if DATA_VERBS.contains(&verb) {
            if let Some(to) = passive.take() {
                data = Some(std::net::TcpStream::connect(to).unwrap());
            }
        }
        let mut replies = vec![c.cmd(&line)];
        let mut carried = None;
        if replies[0].starts_with('1') {
            if let Some(mut conn) = data.take() {
                conn.set_read_timeout(Some(std::time::Duration::from_secs(20))).unwrap();
                if ["STOR", "APPE", "ESTO"].contains(&verb) {
                    std::io::Write::write_all(&mut conn, b"hello").unwrap();
                } else {
                    let mut got = Vec::new();
                    std::io::Read::read_to_end(&mut conn, &mut got).unwrap();
                    carried = Some(got);
                }
            }
            replies.push(c.reply());
        }
        drop(data);
        let last = replies.last().cloned().unwrap_or_default();
        if verb != "QUIT" && (last.starts_with('4') || last.starts_with('5')) {
            c.send(b"NOOP");
            loop {
                let r = c.reply();
                if r.is_empty() || r.starts_with("200 ") {
                    break;
                }
                replies.push(r);
            }
        }
        let first = replies[0].lines().next().unwrap_or("").to_string();
        if first.starts_with("227 ") {
            passive = Some(pasv_addr(&first));
        } else if first.starts_with("229 ") {
            if let Some(port) = first.split("|||").nth(1).and_then(|p| p.split('|').next()?.parse::<u16>().ok()) {
                passive = Some(SocketAddr::new(addr.ip(), port));
            }
        }
        let codes: Vec<&str> = replies
            .iter()
            .filter(|r| r.len() >= 3 && r.as_bytes()[..3].iter().all(u8::is_ascii_digit))
            .map(|r| &r[..3])
            .collect();
        let facts = match (&carried, verb) {
            (Some(d), "MLSD" | "MLSR") => fact_names(String::from_utf8_lossy(d).split('\n')),
            (_, "MLST") => fact_names(replies[0].lines().filter_map(|l| l.strip_prefix(' '))),
            _ => Default::default(),
        };
        out.push(Seen { codes: codes.join(">"), first, data: carried, facts });
    }
    out
}

fn classes(codes: &str) -> String {
    codes.split('>').map(|c| &c[..1.min(c.len())]).collect::<Vec<_>>().join(">")
}

/// Compares one step; `None` when it conforms to its table entry.
fn judge(step: &str, want: Want, f: &Seen, g: &Seen) -> Option<String> {
    let ok = match want {
        C => f.codes == g.codes,
        T => f.codes == g.codes && if f.data.is_some() { f.data == g.data } else { f.first == g.first },
        K => classes(&f.codes) == classes(&g.codes),
        F => f.codes == g.codes && !f.facts.is_empty() && f.facts == g.facts,
        D(fw, gw, why) => {
            assert!(!why.is_empty(), "{step}: a deliberate difference needs its reason");
            f.codes == fw && g.codes == gw
        }
    };
    (!ok).then(|| {
        format!(
            "{step} ({want:?}): ferry {} {:?} {:?} / globus {} {:?} {:?}",
            f.codes, f.first, f.facts, g.codes, g.first, g.facts
        )
    })
}

fn globus_installed() -> bool {
    std::process::Command::new("sh")
        .args(["-c", "command -v globus-gridftp-server || test -x /usr/sbin/globus-gridftp-server"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// Every case of the table, against both servers; one report of every
/// step that does not relate as its entry says.
#[test]
fn ferry_answers_as_globus_does() {
    if !globus_installed() {
        println!(
            "SKIPPED: globus-gridftp-server is not installed (Debian globus-gridftp-server-progs; CI installs it)"
        );
        return;
    }
    let ferry = FerryServer::start();
    let globus = GlobusServer::start();
    let globus_addr: SocketAddr = format!("127.0.0.1:{}", globus.port).parse().unwrap();
    let globus_dir = globus.path("d").display().to_string();
    let mut failures = Vec::new();
    for case in CASES {
        fixture(ferry.root.path());
        let f = dialogue(ferry.addr, case.login.then_some(ALICE), "/d", case.steps);
        fixture(globus.dir.path());
        chown_nobody(globus.dir.path());
        let g = dialogue(globus_addr, case.login.then_some(("anonymous", "x")), &globus_dir, case.steps);
        println!("== {}", case.name);
        for (((step, want), f), g) in case.steps.iter().zip(&f).zip(&g) {
            let verdict = judge(step, *want, f, g);
            println!(
                "{} {step:<36} ferry {:<10} globus {:<10} {}",
                if verdict.is_some() { "!!" } else { "  " },
                f.codes,
                g.codes,
                f.first
            );
            failures.extend(verdict.map(|v| format!("[{}] {v}", case.name)));
        }
    }
    assert!(failures.is_empty(), "{} steps differ from the table:\n{}", failures.len(), failures.join("\n"));
}

/// What lftp shows of `dir/` with `cls -l` over MLSD and then over LIST,
/// one `type name size time` line per entry (directories without size
/// and time: theirs are each server's own); Globus's `.` and `..` left out.
fn lftp_entries(addr: SocketAddr, user: (&str, &str), dir: &str) -> Vec<String> {
    let script = format!(
        "set cmd:fail-exit yes; set net:max-retries 1; set net:timeout 20; set ftp:ssl-allow no; \
         open -u {},{} ftp://{addr}; cls -l --sort=name {dir}/; set ftp:use-mlsd off; cls -l --sort=name {dir}/",
        user.0, user.1
    );
    let out = lftp().args(["-c", &script]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{addr}: lftp failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    // The Globus server ends listing lines in TYPE A with CR CR LF, so
    // lftp shows its names with a CR (docs/conformance.md); the caller
    // checks Ferry's have none.
    let cr = text.matches('\r').count();
    std::iter::once(format!("names with a CR: {cr}"))
        .chain(text.lines().filter_map(|l| {
            let l = l.replace('\r', "");
            // -rw-r--r-- owner group size Mon DD YYYY|HH:MM path
            let w: Vec<&str> = l.split_whitespace().collect();
            let name = w.last()?.trim_end_matches('/').rsplit('/').next()?;
            if name == "." || name == ".." || w.len() < 8 {
                return None;
            }
            let kind = &w[0][..1];
            let (size, time) =
                if kind == "d" { ("-".to_string(), "-".to_string()) } else { (w[3].to_string(), w[4..7].join(" ")) };
            Some(format!("{kind} {name} {size} {time}"))
        }))
        .collect()
}

/// What Python's ftplib makes of `dir`: `mlsd` entries (type and size),
/// `size` of `t` in TYPE A and TYPE I, and `t` downloaded in ASCII.
fn ftplib_view(addr: SocketAddr, user: (&str, &str), dir: &str) -> String {
    let script = r#"
import ftplib, sys
host, port, user, password, d = sys.argv[1:]
f = ftplib.FTP()
f.connect(host, int(port), timeout=20)
f.login(user, password)
out = []
cr = 0
for name, facts in sorted(f.mlsd(d, ["type", "size"])):
    # Globus's CR CR LF line ends read as an empty entry after each line.
    if facts.get("type") in ("cdir", "pdir", None):
        continue
    cr += name.endswith("\r")
    name = name.rstrip("\r")
    out.append("%s %s %s" % (name, facts["type"], facts["size"] if facts["type"] == "file" else "-"))
print("names with a CR: %d" % cr)
f.sendcmd("TYPE A")
out.append("size in A: %s" % f.size(d + "/t"))
lines = []
f.retrlines("RETR " + d + "/t", lines.append)
out.append("ascii lines: %r" % lines)
f.sendcmd("TYPE I")
out.append("size in I: %s" % f.size(d + "/t"))
f.quit()
print("\n".join(out))
"#;
    let out = std::process::Command::new(require("python3"))
        .args(["-c", script, &addr.ip().to_string(), &addr.port().to_string(), user.0, user.1, dir])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{addr}: ftplib failed: {text}{}", String::from_utf8_lossy(&out.stderr));
    text
}

/// What curl makes of `url` (a directory URL ending in `/`): the NLST
/// names (`-l`), the last word of each LIST line, and `t` downloaded in
/// ASCII (`-B`), blank lines kept.
fn curl_view(url: &str) -> (Vec<String>, Vec<String>, Vec<u8>) {
    let curl = require("curl");
    let run = |args: &[&str], url: &str| {
        let out =
            std::process::Command::new(&curl).args(["-sS", "--max-time", "30"]).args(args).arg(url).output().unwrap();
        assert!(out.status.success(), "curl {args:?} {url}: {}", String::from_utf8_lossy(&out.stderr));
        out.stdout
    };
    let lines =
        |b: Vec<u8>| String::from_utf8_lossy(&b).split('\n').map(|l| l.trim_end_matches('\r').to_string()).collect();
    let nlst: Vec<String> = lines(run(&["-l"], url));
    let list: Vec<String> =
        lines(run(&[], url)).iter().map(|l| l.split_whitespace().last().unwrap_or("").to_string()).collect();
    (nlst, list, run(&["-B"], &format!("{url}t")))
}

/// The sweep's step 3, with the clients that parse what the data
/// connection carries: lftp's `cls -l` over MLSD and over LIST, and
/// Python's ftplib (`mlsd` facts, `size` in TYPE A and I, an ASCII
/// download), and curl (NLST, LIST, an ASCII download) see the same
/// names, types, sizes and file times on both servers; and lftp sees the
/// same over MLSD as over LIST.
#[test]
fn clients_read_both_servers_listings_alike() {
    if !globus_installed() {
        println!(
            "SKIPPED: globus-gridftp-server is not installed (Debian globus-gridftp-server-progs; CI installs it)"
        );
        return;
    }
    let ferry = FerryServer::start();
    let globus = GlobusServer::start();
    fixture(ferry.root.path());
    fixture(globus.dir.path());
    chown_nobody(globus.dir.path());
    let globus_addr: SocketAddr = format!("127.0.0.1:{}", globus.port).parse().unwrap();
    let globus_dir = globus.path("d").display().to_string();

    let f = lftp_entries(ferry.addr, ALICE, "/d");
    let g = lftp_entries(globus_addr, ("anonymous", "x"), &globus_dir);
    println!("lftp, ferry:\n{}\nlftp, globus:\n{}", f.join("\n"), g.join("\n"));
    assert_eq!(f[0], "names with a CR: 0", "ferry's listing lines end in CRLF");
    assert_ne!(g[0], "names with a CR: 0", "Globus's CR CR LF listing lines are fixed: update docs/conformance.md");
    assert_eq!(f.len(), 11, "five entries over MLSD, five over LIST: {f:?}");
    assert_eq!(f[1..6], f[6..], "ferry: MLSD and LIST disagree");
    assert_eq!(f[1..], g[1..]);

    let f = ftplib_view(ferry.addr, ALICE, "/d");
    let g = ftplib_view(globus_addr, ("anonymous", "x"), &globus_dir);
    println!("ftplib, ferry:\n{f}ftplib, globus:\n{g}");
    assert!(f.starts_with("names with a CR: 0\n"), "{f}");
    assert!(f.contains("size in A: 6\n") && f.contains("ascii lines: ['a', 'b', 'c']"), "{f}");
    let rest = |s: &str| s.lines().skip(1).map(str::to_string).collect::<Vec<_>>();
    assert_eq!(rest(&f), rest(&g));

    // curl: paths in its URLs are relative to the login directory, so
    // Globus's absolute one starts with %2F.
    let (f_nlst, f_list, f_t) = curl_view(&ferry.url(ALICE, "/d/"));
    let (g_nlst, g_list, g_t) =
        curl_view(&format!("ftp://anonymous:x@{globus_addr}/%2F{}/", globus_dir.trim_start_matches('/')));
    println!("curl, ferry: {f_nlst:?} {f_list:?}\ncurl, globus: {g_nlst:?} {g_list:?}");
    let names = ["e", "empty", "f", "sub", "t", ""].map(String::from).to_vec();
    assert_eq!(f_nlst, names, "ferry NLST, one CRLF line per name");
    assert_eq!(f_list, names, "ferry LIST");
    // Globus: CR CR LF line ends read as a blank line after each name,
    // and `.` and `..` are listed.
    assert!(g_nlst.windows(2).any(|w| w[1].is_empty() && !w[0].is_empty()), "{g_nlst:?}");
    let real = |v: &[String]| v.iter().filter(|n| !["", ".", ".."].contains(&n.as_str())).cloned().collect::<Vec<_>>();
    assert_eq!(real(&f_nlst), real(&g_nlst));
    assert_eq!(real(&f_list), real(&g_list));
    assert_eq!(f_t, b"a\nb\nc\n");
    assert_eq!(f_t, g_t);
}

/// FEAT (RFC 2389 §3.2): every feature both servers advertise is spelt
/// the same, but CKSM and MLST, whose lists are each server's own (Globus
/// writes `CKSM MD5:10;…` with priorities; no client we run reads them).
/// Features only Ferry has are its own extensions or TLS; those only
/// Globus has are named in docs/conformance.md.
#[test]
fn feat_lines_of_shared_features_read_alike() {
    if !globus_installed() {
        println!(
            "SKIPPED: globus-gridftp-server is not installed (Debian globus-gridftp-server-progs; CI installs it)"
        );
        return;
    }
    let ferry = FerryServer::start();
    let globus = GlobusServer::start();
    let feat = |addr: SocketAddr, user: (&str, &str)| {
        let mut c = RawControl::connect(addr);
        c.login(user);
        let r = c.cmd("FEAT");
        assert!(r.starts_with("211-Extensions supported\r\n") && r.ends_with("211 End.\r\n"), "{r}");
        r.lines()
            .filter(|l| l.starts_with(' '))
            .map(|l| (l.split_whitespace().next().unwrap().to_string(), l.to_string()))
            .collect::<std::collections::BTreeMap<_, _>>()
    };
    let f = feat(ferry.addr, ALICE);
    let g = feat(format!("127.0.0.1:{}", globus.port).parse().unwrap(), ("anonymous", "x"));
    let shared: Vec<&String> = f.keys().filter(|k| g.contains_key(*k)).collect();
    println!(
        "shared: {shared:?}\nonly ferry: {:?}\nonly globus: {:?}",
        f.keys().filter(|k| !g.contains_key(*k)).collect::<Vec<_>>(),
        g.keys().filter(|k| !f.contains_key(*k)).collect::<Vec<_>>()
    );
    for want in
        ["ERET", "ESTO", "MDTM", "MFMT", "MLSR", "MLST", "PARALLEL", "PASV", "REST", "SIZE", "SPAS", "SPOR", "UTF8"]
    {
        assert!(shared.iter().any(|k| *k == want), "{want} is not advertised by both: {shared:?}");
    }
    for k in shared.into_iter().filter(|k| !["CKSM", "MLST"].contains(&k.as_str())) {
        assert_eq!(f[k], g[k], "FEAT {k}");
    }
}

/// The table covers every command Ferry's HELP lists (and so every one
/// its FEAT advertises).
#[test]
fn the_table_covers_every_command_ferry_offers() {
    let ferry = FerryServer::start();
    let mut c = RawControl::connect(ferry.addr);
    c.login(ALICE);
    let help = c.cmd("HELP");
    let verbs: Vec<&str> = help
        .lines()
        .skip(1)
        .take_while(|l| !l.starts_with("214 ") && !l.contains(','))
        .flat_map(str::split_whitespace)
        .collect();
    assert!(verbs.len() > 40, "{help}");
    let used: std::collections::BTreeSet<&str> =
        CASES.iter().flat_map(|c| c.steps.iter()).filter_map(|(s, _)| s.split(' ').next()).collect();
    // USER and PASS open every dialogue.
    let missing: Vec<&&str> = verbs.iter().filter(|v| !used.contains(**v) && !["USER"].contains(*v)).collect();
    assert!(missing.is_empty(), "commands HELP lists that no case sends: {missing:?}");
    let sites: Vec<&str> = CASES
        .iter()
        .flat_map(|c| c.steps.iter())
        .filter_map(|(s, _)| s.strip_prefix("SITE ")?.split(' ').next())
        .collect();
    for site in
        ["HELP", "CLIENTINFO", "CHMOD", "UTIME", "SETDISKSTACK", "SETNETSTACK", "RETRBUFSIZE", "STORBUFSIZE", "WHOAMI"]
    {
        assert!(sites.contains(&site), "no case sends SITE {site}");
    }
}

/// The sweep. Each step is one command line; `{d}` is the fixture directory.
/// Reasons several deliberate differences share.
const NO_DATA_CHANNEL: &str = "no data channel yet: RFC 959's 425 (as vsftpd and ProFTPD answer); Globus says 500";
const LS_OPTIONS: &str =
    "ls-style options that clients send (lftp's `LIST -a`); Ferry sets them aside, Globus takes them for a path";
const RETR_DIRECTORY: &str = "a directory cannot be retrieved: refused before any data connection (RFC 959's 550); Globus opens the transfer (150) and then fails it (500)";
const X_VERBS: &str = "RFC 775's X verbs, which some clients still send; Globus lacks them";

const CASES: &[Case] = &[
    Case {
        name: "before login",
        login: false,
        steps: &[
            ("NOOP", C),
            ("PWD", C),
            ("SYST", D("215", "530", "RFC 959 lets SYST be answered before login, and clients (curl, lftp) send it early; Globus wants a login")),
            ("FEAT", C),
            ("HELP", C),
            ("SITE HELP", C),
            ("OPTS UTF8 ON", D("200", "530", "RFC 2640 clients send it before login (FileZilla); Globus wants a login")),
            ("RETR {d}/f", C),
            ("PASV", C),
            ("STAT", C),
            ("MKD {d}/x", C),
            ("PASS x", C),
            ("USER", C),
            ("USER nosuch", C),
            ("PASS wrong", C),
            ("PWD", C),
            ("USER anonymous", C),
            ("PASS x", C),
            ("PWD", C),
            ("QUIT", C),
        ],
    },
    Case {
        name: "greeting and help",
        login: true,
        steps: &[
            ("FEAT", C),
            ("SITE HELP", C),
            ("HELP", C),
            ("HELP RETR", C),
            ("HELP FOO", C),
            ("NOOP", C),
            ("SYST", C),
            ("STAT", K),
            ("STAT {d}/f", C),
            ("STAT {d}/nope", C),
            ("PWD", C),
            ("QUIT", C),
        ],
    },
    Case {
        name: "TYPE variants",
        login: true,
        steps: &[
            ("TYPE I", C),
            ("TYPE A", C),
            ("TYPE A N", C),
            ("TYPE L 8", D("200", "501", "RFC 959 §3.1.1.4: TYPE L 8 is the image type on 8-bit hosts; Globus refuses it")),
            ("TYPE E", K),
            ("TYPE X", C),
            ("TYPE", C),
            // The format control changes nothing for a file store: both
            // take it as TYPE A (the same CRLF bytes follow).
            ("TYPE A T", C),
            ("PASV", C),
            ("RETR {d}/t", T),
            ("TYPE A C", C),
            ("PASV", C),
            ("RETR {d}/t", T),
            ("TYPE a t", C),
            ("TYPE L 7", K),
        ],
    },
    Case {
        name: "STRU variants",
        login: true,
        steps: &[
            ("STRU F", C),
            ("STRU R", K),
            ("STRU P", K),
            ("STRU X", C),
            ("STRU", C),
        ],
    },
    Case {
        name: "MODE variants",
        login: true,
        steps: &[
            ("MODE S", C),
            ("MODE E", C),
            ("MODE B", K),
            ("MODE C", K),
            ("MODE X", C),
            ("MODE", C),
            ("MODE S", C),
        ],
    },
    Case {
        name: "transfers before PASV or PORT",
        login: true,
        steps: &[
            ("RETR {d}/f", D("425", "500", NO_DATA_CHANNEL)),
            ("STOR {d}/new", D("425", "500", NO_DATA_CHANNEL)),
            ("APPE {d}/f", D("425", "500", NO_DATA_CHANNEL)),
            ("LIST {d}", D("425", "500", NO_DATA_CHANNEL)),
            ("NLST {d}", D("425", "500", NO_DATA_CHANNEL)),
            ("MLSD {d}", D("425", "500", NO_DATA_CHANNEL)),
            ("ESTO A 0 {d}/f", D("425", "500", NO_DATA_CHANNEL)),
            ("ERET P 0 2 {d}/f", D("425", "500", NO_DATA_CHANNEL)),
            ("NOOP", C),
        ],
    },
    Case {
        name: "rename",
        login: true,
        steps: &[
            ("RNTO {d}/x", K),
            ("RNFR {d}/nope", K),
            ("RNFR", C),
            ("RNFR {d}/f", C),
            ("RNTO {d}/g", C),
            ("SIZE {d}/g", T),
            ("RNFR {d}/g", C),
            ("RNTO {d}/nodir/x", C),
            ("RNFR {d}/g", C),
            ("RNTO", C),
            ("RNFR {d}/g", C),
            ("RNTO {d}/sub/h", C),
            ("SIZE {d}/sub/h", T),
            ("RNFR {d}/sub/h", C),
            ("NOOP", C),
            ("RNTO {d}/f", D("503", "250", "RFC 959 §4.1.3: RNTO must immediately follow RNFR; Globus keeps the RNFR name across a NOOP")),
        ],
    },
    Case {
        name: "restart",
        login: true,
        steps: &[
            ("TYPE I", C),
            ("REST 2", C),
            ("NOOP", C),
            ("PASV", C),
            ("RETR {d}/f", T),
            ("REST 3", C),
            ("SIZE {d}/f", T),
            ("PASV", C),
            ("RETR {d}/f", T),
            ("PASV", C),
            ("REST 1", C),
            ("RETR {d}/f", T),
            ("REST abc", C),
            ("REST", C),
            ("REST -1", C),
            ("REST 0-5", C),
            ("REST 5-1", D("501", "350", "a range that ends before it starts is a syntax error; Globus accepts it")),
            ("REST 9", C),
            ("PASV", C),
            ("RETR {d}/f", D("554", "150>226", "a restart offset past the end of the file is refused with 554 (RFC 959's REST error) before any data; Globus sends an empty file")),
        ],
    },
    Case {
        name: "passive without a connection",
        login: true,
        steps: &[
            ("PASV", C),
            ("NOOP", C),
            ("PASV", C),
            ("PASV", C),
            ("EPSV", C),
            ("EPSV 1", C),
            ("EPSV 2", D("522", "229", "RFC 2428 §3: this IPv4 control connection has no IPv6 data address, so 522; Globus answers 229 with its IPv4 address")),
            ("EPSV 3", K),
            ("EPSV x", C),
            ("PASV x", D("501", "227", "PASV takes no argument (RFC 959); Globus ignores one")),
            ("EPSV ALL", K),
            ("PASV", D("503", "227", "RFC 2428 §4: after EPSV ALL every other data-connection setup command is refused; Globus allows PASV")),
            ("EPSV", C),
            ("NOOP", C),
        ],
    },
    Case {
        name: "active",
        login: true,
        steps: &[
            ("PORT 127,0,0,1,1,1", D("501", "200", "FTP bounce protection (RFC 2577 §3): no data connection to a privileged port; Globus connects")),
            ("PORT 127,0,0,1,200,1", C),
            ("PORT", C),
            ("PORT 1,2,3", C),
            ("PORT 300,0,0,1,1,1", C),
            ("EPRT |1|127.0.0.1|51201|", C),
            ("EPRT |2|::1|51201|", D("501", "200", "FTP bounce protection (RFC 2577): a data connection goes only to the client's own address; Globus accepts any")),
            ("EPRT |9|x|1|", C),
            ("EPRT garbage", K),
            ("EPRT", C),
        ],
    },
    Case {
        name: "size and mdtm",
        login: true,
        steps: &[
            ("SIZE {d}/f", T),
            ("SIZE {d}", D("550", "213", "RFC 3659 §4: SIZE is a file's transfer size, so 550 for a directory (as vsftpd and ProFTPD); Globus gives the inode size")),
            ("SIZE {d}/nope", C),
            ("SIZE", C),
            ("MDTM {d}/f", T),
            ("MDTM {d}", C),
            ("MDTM {d}/nope", C),
            ("MDTM", C),
            ("TYPE A", C),
            ("SIZE {d}/f", T),
            ("SIZE {d}/e", T),
            // SIZE in TYPE A of a file with LF line ends: both answer the
            // size on disk (6), and both send 9 bytes (CRLF).
            ("SIZE {d}/t", T),
            ("PASV", C),
            ("RETR {d}/t", T),
            ("TYPE I", C),
            ("SIZE {d}/t", T),
            ("PASV", C),
            ("RETR {d}/t", T),
        ],
    },
    Case {
        name: "mlst and opts mlst",
        login: true,
        steps: &[
            ("MLST {d}/f", C),
            ("MLST {d}", C),
            ("MLST {d}/nope", C),
            ("CWD {d}", C),
            ("MLST", C),
            ("MLST f", C),
            ("OPTS MLST type;size;", C),
            ("MLST {d}/f", F),
            ("PASV", C),
            ("MLSD {d}", F),
            ("PASV", C),
            ("MLSR {d}", F),
            ("OPTS MLST Modify;TYPE;bogus;", C),
            ("MLST {d}/f", F),
            ("OPTS MLST", D("200", "500", "RFC 3659 §7: OPTS MLST with no facts is valid and answered 200; Globus says 500")),
            ("OPTS MLST bogus;", C),
            ("MLST {d}/f", F),
            ("PASV", C),
            ("MLSD {d}", F),
            ("PASV", C),
            ("MLSR {d}", F),
            ("OPTS MLST size;", C),
            ("MLST {d}/f", F),
            ("PASV", C),
            ("MLSR {d}/f", F),
            // Globus takes OPTS MLSD and OPTS MLSR as the same selection.
            ("OPTS MLSR type;", C),
            ("MLST {d}/f", F),
            ("PASV", C),
            ("MLSR {d}", F),
            ("OPTS MLSD Size;Perm;", C),
            ("PASV", C),
            ("MLSD {d}", F),
            ("MLST {d}/f", F),
        ],
    },
    Case {
        name: "opts",
        login: true,
        steps: &[
            ("OPTS RETR Parallelism=4,4,4;", C),
            ("OPTS RETR", D("200", "500", "an empty OPTS RETR changes nothing and is answered 200; Globus says 500")),
            ("OPTS RETR bogus=1;", K),
            ("OPTS RETR Parallelism=x;", K),
            ("OPTS UTF8 ON", D("200", "500", "RFC 2640 clients (FileZilla, WinSCP) send it and Ferry's paths are UTF-8; Globus says 500")),
            ("OPTS PASV AllowDelayed=1;", C),
            ("OPTS", C),
            ("OPTS FOO", K),
            ("OPTS STOR Parallelism=2,2,2;", K),
        ],
    },
    Case {
        name: "listings",
        login: true,
        steps: &[
            ("TYPE A", C),
            ("PASV", C),
            ("LIST {d}/nope", C),
            ("PASV", C),
            ("LIST {d}/f", C),
            ("PASV", C),
            ("NLST {d}/nope", C),
            ("PASV", C),
            ("NLST {d}/f", C),
            ("PASV", C),
            ("MLSD {d}/nope", C),
            ("PASV", C),
            ("MLSD {d}/f", D("550", "150>226", "RFC 3659 §7: MLSD lists a directory, so 550 Not a directory; Globus lists the file")),
            ("PASV", C),
            ("MLSD {d}", C),
            ("PASV", C),
            ("LIST {d}", C),
            ("PASV", C),
            ("NLST {d}", C),
            ("PASV", C),
            ("MLSD {d}/empty", C),
            ("PASV", C),
            ("LIST {d}/empty", C),
            ("PASV", C),
            ("MLSR {d}/nope", C),
            ("PASV", C),
            ("MLSR {d}", C),
        ],
    },
    Case {
        name: "uploads",
        login: true,
        steps: &[
            ("TYPE I", C),
            ("PASV", C),
            ("STOR {d}/new", C),
            ("SIZE {d}/new", T),
            ("PASV", C),
            ("APPE {d}/new", C),
            ("SIZE {d}/new", T),
            ("PASV", C),
            ("STOR {d}", K),
            ("PASV", C),
            ("STOR {d}/nodir/x", K),
            ("PASV", C),
            ("ESTO A 0 {d}/new", C),
            ("ALLO 5", C),
            ("PASV", C),
            ("STOR {d}/new2", C),
            ("SIZE {d}/new2", T),
        ],
    },
    Case {
        name: "directories",
        login: true,
        steps: &[
            ("MKD {d}/n", C),
            ("MKD {d}/n", K),
            ("MKD {d}/f", K),
            ("MKD", C),
            ("MKD {d}/a/b", C),
            ("RMD {d}/n", C),
            ("RMD {d}/n", C),
            ("RMD {d}/sub", D("550", "451", "a directory that is not empty is a permanent failure, 550 (RFC 959); Globus's 451 invites a retry that cannot succeed")),
            ("RMD {d}/f", C),
            ("RMD", C),
            ("RMD {d}/empty", C),
            ("DELE {d}/sub", C),
            ("DELE {d}/nope", C),
            ("DELE", C),
            ("DELE {d}/e", C),
        ],
    },
    Case {
        name: "cwd",
        login: true,
        steps: &[
            ("CWD {d}/f", C),
            ("CWD {d}/nope", C),
            ("CWD", C),
            ("CWD {d}", C),
            ("PWD", C),
            ("CWD sub", C),
            ("CDUP", C),
            ("CDUP x", D("501", "250", "CDUP takes no argument (RFC 959); Globus ignores one")),
            ("XPWD", D("257", "500", X_VERBS)),
            ("XCWD {d}", D("250", "500", X_VERBS)),
            ("XCUP", D("250", "500", X_VERBS)),
            ("PWD", C),
        ],
    },
    Case {
        name: "site",
        login: true,
        steps: &[
            ("SITE CHMOD 600 {d}/f", K),
            ("SITE CHMOD 644 {d}/nope", C),
            ("SITE CHMOD abc {d}/e", D("501", "250", "a mode that is not octal is refused; Globus sets mode 0")),
            ("SITE CHMOD", C),
            ("SITE CHMOD 644", C),
            ("SITE BUFSIZE 1048576", D("200", "500", "Ferry also takes the older SITE BUFSIZE name for the buffer size; Globus lacks it")),
            ("SITE SBUF 1048576", C),
            ("SITE BUFSIZE x", K),
            ("SITE RETRBUFSIZE 4194304", C),
            ("SITE STORBUFSIZE 4194304", C),
            ("SITE SETNETSTACK tcp", C),
            ("SITE SETNETSTACK bogus", K),
            ("SITE SETDISKSTACK file", C),
            ("SITE SETDISKSTACK bogus", K),
            ("SITE CLIENTINFO scheme=ftp;appname=\"conformance\";", C),
            ("SITE FOO", C),
            ("SITE", C),
            ("SITE WHOAMI", C),
            ("SITE UTIME 20200101000000 {d}/f", C),
            ("SITE HELP", C),
        ],
    },
    Case {
        name: "sbuf",
        login: true,
        steps: &[
            ("SBUF 1048576", C),
            ("SBUF", C),
            ("SBUF x", K),
            ("SBUF 0", D("501", "200", "a zero-byte buffer is refused; Globus accepts it")),
        ],
    },
    Case {
        name: "cksm",
        login: true,
        steps: &[
            ("CKSM MD5 0 -1 {d}/f", T),
            ("CKSM MD5 0 3 {d}/f", T),
            ("CKSM ADLER32 0 -1 {d}/f", T),
            ("CKSM SHA1 0 -1 {d}/f", T),
            ("CKSM SHA256 0 -1 {d}/f", T),
            ("CKSM SHA512 0 -1 {d}/f", T),
            ("CKSM md5 0 -1 {d}/f", T),
            ("CKSM MD5 2 -1 {d}/f", T),
            ("CKSM MD5 5 -1 {d}/f", T),
            ("CKSM MD5 0 0 {d}/f", T),
            ("CKSM MD5 10 -1 {d}/f", T),
            ("CKSM MD5 0 100 {d}/f", T),
            ("CKSM MD5 0 -1 {d}/e", T),
            ("CKSM CRC32 0 -1 {d}/f", K),
            ("CKSM FOO 0 -1 {d}/f", K),
            ("CKSM MD5 0 -1 {d}/nope", K),
            ("CKSM MD5 0 -1 {d}", K),
            ("CKSM MD5 x y {d}/f", K),
            ("CKSM MD5 -2 -1 {d}/f", K),
            ("CKSM MD5 0 -2 {d}/f", K),
            ("CKSM MD5 0 -1", C),
            ("CKSM MD5", C),
            ("CKSM", C),
        ],
    },
    Case {
        name: "allo",
        login: true,
        steps: &[
            ("ALLO 100", C),
            ("ALLO", C),
            ("ALLO x", C),
            ("ALLO 100 R 10", C),
            ("ALLO -1", D("501", "200", "ALLO's size is a decimal count (RFC 959 §4.1.3); Globus accepts -1")),
        ],
    },
    Case {
        name: "eret and esto arguments",
        login: true,
        steps: &[
            ("ESTO", C),
            ("ESTO X 0 {d}/f", K),
            ("ESTO A x {d}/f", C),
            ("ESTO A 0", C),
            ("ERET", C),
            ("ERET X 0 2 {d}/f", K),
            ("ERET P x 2 {d}/f", K),
            ("ERET P 0 2", C),
            ("ERET P 0", K),
            ("TYPE I", C),
            ("PASV", C),
            ("ERET P 1 2 {d}/f", T),
            ("PASV", C),
            ("ERET P 0 2 {d}/nope", K),
        ],
    },
    Case {
        name: "striping",
        login: true,
        steps: &[
            ("SPAS", C),
            ("SPOR 127,0,0,1,200,1", C),
            ("SPOR", C),
            ("SPOR x", K),
            ("SPAS", C),
            ("NOOP", C),
        ],
    },
    Case {
        name: "security without tls",
        login: true,
        steps: &[
            ("DCAU N", C),
            ("DCAU A", D("504", "200", "DCAU A needs GSI credentials, which Ferry does not use (docs/security.md); Globus says 200 with none")),
            ("DCAU S", C),
            ("DCAU X", C),
            ("DCAU", C),
            ("PBSZ 0", D("503", "200", "RFC 4217: PBSZ follows AUTH TLS; Globus accepts it on a clear session")),
            ("PBSZ", C),
            ("PROT C", C),
            ("PROT P", D("503", "200", "RFC 4217: PROT P needs AUTH TLS and PBSZ first; Globus says 200 and protects nothing")),
            ("PROT X", K),
            ("PROT", C),
            ("AUTH TLS", D("431", "500", "RFC 4217's 431 for a server with no certificate configured; Globus without GSI says 500")),
            ("AUTH GSSAPI", D("431", "500", "RFC 4217's 431 for a mechanism the server cannot offer; Globus without GSI says 500")),
            ("AUTH", K),
            ("CCC", K),
            ("NOOP", C),
        ],
    },
    Case {
        name: "misc",
        login: true,
        steps: &[
            ("LANG", C),
            ("LANG EN", C),
            ("LANG FR", K),
            ("MFMT 20200101000000 {d}/f", K),
            ("MFMT 2020 {d}/f", C),
            ("MFMT 20200101000000 {d}/nope", C),
            ("MFMT", C),
            ("TREV PERF 5", C),
            ("TREV X 5", K),
            ("TREV", C),
            ("STOU", K),
            ("ABOR", K),
            ("ACCT x", D("202", "500", "RFC 959: 202, no account needed; Globus says 500")),
            ("SMNT /", K),
            ("FOO", C),
            ("TPRT tcp", D("200", "500", "TPRT is Ferry's transport negotiation (docs/transports.md); Globus lacks it")),
            ("MLSC {d}", D("500", "250", "MLSC (a listing on the control channel) is a Globus extension Ferry does not offer or advertise")),
            ("DCSC P", K),
            ("USER anonymous", K),
            ("REIN", K),
            ("BRET", K),
            ("BSTO", K),
            ("BRET 1", K),
            ("PASS x", D("202", "503", "RFC 959: 202, superfluous, when already logged in; Globus says 503")),
            ("NOOP", C),
        ],
    },
    Case {
        name: "paths and ls options",
        login: true,
        steps: &[
            ("TYPE A", C),
            ("PASV", C),
            ("LIST -la {d}", C),
            ("PASV", C),
            ("LIST -l {d}", C),
            ("PASV", C),
            ("NLST -a {d}", D("150>226", "550", LS_OPTIONS)),
            ("CWD {d}", C),
            ("PASV", C),
            ("LIST -a", C),
            ("PASV", C),
            ("NLST -a", D("150>226", "550", LS_OPTIONS)),
            ("STAT -la {d}", D("213", "550", LS_OPTIONS)),
            ("CWD {d}/", C),
            ("MKD {d}/x/", C),
            ("RMD {d}/x/", C),
            ("MKD {d}/n n", C),
            ("PASV", C),
            ("STOR {d}/n n/a b", C),
            ("SIZE {d}/n n/a b", T),
            ("MLST {d}/n n/a b", C),
            ("PASV", C),
            ("RETR {d}/n n/a b", T),
            ("RNFR {d}/n n/a b", C),
            ("RNTO {d}/n n/b c", C),
            ("DELE {d}/n n/b c", C),
            ("RMD {d}/n n", C),
            ("CWD {d}//sub", C),
            ("SIZE {d}//f", T),
            ("SIZE {d}/./f", T),
            ("SIZE {d}/sub/../f", T),
            ("RNFR {d}/f", C),
            ("RNTO {d}/sub", C),
            ("RNFR {d}/f", C),
            ("RNTO {d}/e", C),
            ("SIZE {d}/e", T),
        ],
    },
    Case {
        name: "partial transfers",
        login: true,
        steps: &[
            ("TYPE I", C),
            ("PASV", C),
            ("ERET P 3 10 {d}/f", T),
            ("PASV", C),
            ("ERET P 10 2 {d}/f", C),
            ("PASV", C),
            ("ERET P 0 0 {d}/f", C),
            ("PASV", C),
            ("ESTO A 3 {d}/f", C),
            ("SIZE {d}/f", T),
            ("PASV", C),
            ("RETR {d}/f", T),
            ("PASV", C),
            ("APPE {d}/new", C),
            ("SIZE {d}/new", T),
            ("PASV", C),
            ("APPE {d}/new", C),
            ("SIZE {d}/new", T),
            ("REST 2", C),
            ("PASV", C),
            ("STOR {d}/new", C),
            ("SIZE {d}/new", T),
            ("PASV", C),
            ("RETR {d}/new", T),
            ("PASV", C),
            ("ESTO A 100 {d}/e", C),
            ("SIZE {d}/e", T),
            ("CKSM MD5 0 -1 {d}/new", T),
            ("CKSM ADLER32 2 3 {d}/new", T),
        ],
    },
    Case {
        // Session 9: the odd commands of the review's audit list not
        // already above (CDUP at the root, CWD to a file, SIZE of a
        // directory, MLST of a missing path, REST past the end, DELE of
        // a directory, RNFR of a missing file, RNTO without RNFR, ERET
        // with bad ranges, OPTS RETR garbage are).
        name: "odd commands",
        login: true,
        steps: &[
            ("TYPE I", C),
            ("PASV", C),
            ("RETR {d}/sub", D("550", "150>500", RETR_DIRECTORY)),
            ("PASV", C),
            ("RETR {d}/empty", D("550", "150>500", RETR_DIRECTORY)),
            ("PASV", C),
            ("STOR {d}/sub", K),
            ("PASV", C),
            ("STOR {d}/empty", K),
            ("MODE E", C),
            ("PASV", C),
            // In MODE E the sender connects: a download after PASV has
            // no data channel (Ferry 503 says to send PORT; Globus 500).
            ("RETR {d}/f", K),
            ("PASV", C),
            ("LIST {d}", K),
            ("MODE S", C),
            ("SIZE {d}/f\0x", C),
            ("MLST {d}/f\0x", C),
            ("DELE {d}/\0", C),
            ("MKD {d}/a\0b", C),
            ("SIZE {d}/{long}", D("500", "451", "a line over the 8 KiB limit is the client's error (RFC 959's 500, 'command line too long'); Globus answers 451 INTERNAL_ERROR, which invites a retry that fails the same way. Both go on serving the session")),
            ("NOOP", C),
        ],
    },
];
