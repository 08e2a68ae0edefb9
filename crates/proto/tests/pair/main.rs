//! The client's and the server's protocol cores against each other, in
//! memory, on a simulated clock (see `harness.rs`). What is not covered
//! here: TLS (the handshake is the drivers'; AUTH TLS/PBSZ/PROT replies are
//! checked by `client::login`'s tests and `tests/session.rs`), and real
//! sockets (the interop suites). A third-party copy is two pairs whose data
//! connections are joined by the test.

mod harness;

use ferry_proto::client::expect::{ends_abort, refutes_restart, worth_retrying};
use ferry_proto::client::{ClientEvent, Expect, Marker};
use ferry_proto::command::{Allo, Command, Opts, RestArg, TransferMode, TransferType};
use ferry_proto::session::{AnonymousAccess, SessionConfig};
use ferry_proto::RangeSet;
use harness::{decode_mode_e, encode_mode_e, Fs, Pair, Pipe};
use std::time::Duration;

fn config() -> SessionConfig {
    SessionConfig { anonymous: AnonymousAccess::Off, marker_interval_secs: 1, ..SessionConfig::default() }
}

/// Every byte of a `len`-byte file, as one range list.
fn whole(len: usize) -> Vec<std::ops::Range<u64>> {
    RangeSet::new().missing(len as u64)
}

fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
}

fn logged_in(fs: Fs) -> Pair {
    let mut p = Pair::new(config(), fs);
    p.login("alice");
    assert!(p.events.iter().any(|e| matches!(e, ClientEvent::LoggedIn(_))), "{:#?}", p.events);
    p
}

#[test]
fn login_in_one_round_trip_and_feat() {
    let mut p = Pair::new(config(), Fs::default());
    p.login("alice");
    let f = match p.events.first() {
        Some(ClientEvent::LoggedIn(outcome)) => outcome.features.clone(),
        other => panic!("{other:#?}"),
    };
    // The whole login went out in one write, before the greeting was read.
    assert_eq!(p.client_writes, 1);
    assert!(f.mode_e() && f.has("MLST") && f.has("ERET") && f.has_line("SITE PARTIAL") && !f.has("AUTH"));
    assert!(f.checksums().contains(&"XXH128".to_string()));
    // What the client parsed is every line the server's FEAT sent.
    let tag = p.send(Command::Feat, Expect::Completion);
    let (feat, ok, _) = p.wait(tag, 10);
    assert!(ok);
    assert_eq!(feat.lines.len() - 2, f.lines().len());
    assert!(p.client.features() == &f);
}

#[test]
fn a_wrong_password_fails_the_login() {
    let mut p = Pair::new(config(), Fs::default());
    p.client.login("alice", "wrong", false, None, p.now);
    p.drive(20);
    assert!(matches!(p.events.first(), Some(ClientEvent::LoginFailed(_))), "{:#?}", p.events);
    assert!(p.client.is_broken());
}

#[test]
fn a_silent_server_times_out_on_the_simulated_clock() {
    let mut p = logged_in(Fs::default());
    p.send(Command::Noop, Expect::Completion);
    // The NOOP goes out and is never answered: the server has gone quiet.
    p.connected = false;
    let _ = p.client.poll_transmit();
    let deadline = p.client.poll_timeout().expect("a reply is awaited");
    assert_eq!(deadline - p.now, Duration::from_secs(60));
    p.client.handle_timeout(deadline - Duration::from_millis(1));
    assert!(p.client.poll_event().is_none());
    p.client.handle_timeout(deadline);
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::TimedOut { waiting_for: Some(Command::Noop) })));
}

#[test]
fn an_untimed_command_waits_past_the_timeout_and_the_next_one_is_timed_again() {
    let mut p = logged_in(Fs::default());
    // A third-party STOR: its reply waits for the other server, however
    // long that takes; a NOOP behind it is timed from the STOR's answer.
    p.connected = false;
    p.client.send_untimed(Command::Stor("f".into()), Expect::Completion, p.now);
    p.client.send(Command::Noop, Expect::Completion, p.now);
    let _ = p.client.poll_transmit();
    assert_eq!(p.client.poll_timeout(), None, "no deadline for the untimed STOR");
    p.client.handle_timeout(p.now + Duration::from_secs(3600));
    assert!(p.client.poll_event().is_none() && !p.client.is_broken());
    let later = p.now + Duration::from_secs(3600);
    p.client.handle_input(b"150 go\r\n111 Range Marker 0-10\r\n", later);
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::Preliminary { .. })));
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::Marker { marker: Marker::Restart(_), .. })));
    assert_eq!(p.client.poll_timeout(), None, "a transfer runs");
    p.client.handle_input(b"226 done\r\n", later);
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::Done { accepted: true, .. })));
    assert_eq!(p.client.poll_timeout(), Some(later + Duration::from_secs(60)), "the NOOP is timed");
    p.client.handle_timeout(later + Duration::from_secs(60));
    assert!(matches!(p.client.poll_event(), Some(ClientEvent::TimedOut { waiting_for: Some(Command::Noop) })));
}

#[test]
fn stream_mode_store_and_retrieve() {
    let mut p = logged_in(Fs::default());
    let data = pattern(100_000, 1);
    // Set-up and STOR in one write, as the client pipelines them.
    p.send(Command::Type(TransferType::Image), Expect::Positive);
    let pasv = p.send(Command::Pasv, Expect::Passive);
    p.send(Command::Allo(Allo { size: data.len() as u64, record: None }), Expect::Any);
    let stor = p.send(Command::Stor("/up.bin".into()), Expect::Completion);
    p.data.stream_up.push_back(Pipe { bytes: data.iter().copied().collect(), closed: true });
    let (_, ok, addr) = p.wait(pasv, 20);
    assert!(ok && addr.is_some_and(|a| a.ip().to_string() == "127.0.0.1"));
    let (r, ok, _) = p.wait(stor, 100);
    assert!(ok, "{r:?}");
    assert!(p.events.iter().any(|e| matches!(e, ClientEvent::Preliminary { tag, .. } if *tag == stor)));
    assert_eq!(p.server.fs.files["/up.bin"], data);

    p.send(Command::Pasv, Expect::Passive);
    let retr = p.send(Command::Retr("/up.bin".into()), Expect::Completion);
    let (_, ok, _) = p.wait(retr, 100);
    assert!(ok);
    let got: Vec<u8> = p.data.stream_down.pop_front().expect("a data connection").bytes.into();
    assert_eq!(got, data);
    // A missing file is a 550 for the RETR and the session goes on.
    p.send(Command::Pasv, Expect::Passive);
    let retr = p.send(Command::Retr("/nope".into()), Expect::Completion);
    let (r, ok, _) = p.wait(retr, 100);
    assert!(!ok && r.code.get() == 550);
}

#[test]
fn mode_e_store_with_markers_and_retrieve_over_four_streams() {
    let mut p = logged_in(Fs::default());
    p.server.chunk = 1024;
    let data = pattern(1_000_003, 7);
    p.data.up = vec![Pipe::default(); 4];
    encode_mode_e(&data, &whole(data.len()), 32 << 10, &mut p.data.up);
    p.send(Command::Type(TransferType::Image), Expect::Positive);
    p.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    p.send(Command::Pasv, Expect::Passive);
    p.send(Command::Allo(Allo { size: data.len() as u64, record: None }), Expect::Positive);
    let stor = p.send(Command::Stor("/e.bin".into()), Expect::Completion);
    let (r, ok, _) = p.wait(stor, 10_000);
    assert!(ok, "{r:?}");
    assert_eq!(p.server.fs.files["/e.bin"], data);
    // Restart markers came on the simulated clock and add up to the file.
    assert_eq!(p.restart_record(), RangeSet::from_range(0..data.len() as u64));
    assert!(p.events.iter().any(|e| matches!(e, ClientEvent::Marker { marker: Marker::Perf(_), .. })));

    // The download: the sender opens the connections in MODE E (PORT).
    p.send(
        Command::Opts(ferry_proto::command::Opts::Retr(vec![("Parallelism".into(), "4,4,4".into())])),
        Expect::Positive,
    );
    p.send(Command::Port("127.0.0.1:50500".parse().unwrap()), Expect::Positive);
    let retr = p.send(Command::Retr("/e.bin".into()), Expect::Completion);
    let (r, ok, _) = p.wait(retr, 100);
    assert!(ok, "{r:?}");
    let (got, tracker) = decode_mode_e(&mut p.data.down, data.len());
    assert!(tracker.is_complete());
    assert_eq!(got, data);
    // A second download rides the cached connections: 125, not 150.
    let retr = p.send(Command::Retr("/e.bin".into()), Expect::Completion);
    p.wait(retr, 100);
    let pre = p.events.iter().find_map(|e| match e {
        ClientEvent::Preliminary { tag, reply } if *tag == retr => Some(reply.code.get()),
        _ => None,
    });
    assert_eq!(pre, Some(125));
    let (again, _) = decode_mode_e(&mut p.data.down, data.len());
    assert_eq!(again, data);
}

/// 100 files in MODE E over cached connections: the set-up and all 100
/// ALLO+STOR pairs in one write, every reply matched to its command.
#[test]
fn a_hundred_pipelined_files() {
    let mut p = logged_in(Fs::default());
    let files: Vec<(String, Vec<u8>)> =
        (0..100).map(|i| (format!("/many/{i:03}"), pattern(1000 + i * 37, i as u8))).collect();
    p.data.up = vec![Pipe::default(); 2];
    for (_, data) in &files {
        encode_mode_e(data, &whole(data.len()), 512, &mut p.data.up);
    }
    let writes_before = p.client_writes;
    p.send(Command::Type(TransferType::Image), Expect::Positive);
    p.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    p.send(Command::Pasv, Expect::Passive);
    let mut stors = Vec::new();
    for (path, data) in &files {
        p.send(Command::Allo(Allo { size: data.len() as u64, record: None }), Expect::Positive);
        stors.push(p.send(Command::Stor(path.clone()), Expect::Completion));
    }
    assert_eq!(p.client.in_flight(), 203);
    let last = *stors.last().unwrap();
    p.wait(last, 100_000);
    assert_eq!(p.client_writes - writes_before, 1, "one write for the whole batch");
    assert_eq!(p.client.in_flight(), 0);
    for (tag, (path, data)) in stors.iter().zip(&files) {
        let (r, ok, _) = p.done(*tag).expect("answered");
        assert!(ok, "{path}: {r:?}");
        assert_eq!(&p.server.fs.files[path], data, "{path}");
    }
    // The first STOR opened the channel (150); the other 99 reused it (125).
    let mut codes: Vec<u16> = p
        .events
        .iter()
        .filter_map(|e| match e {
            ClientEvent::Preliminary { reply, .. } => Some(reply.code.get()),
            _ => None,
        })
        .collect();
    codes.dedup();
    assert_eq!(codes, [150, 125]);
}

/// A MODE E upload killed half-way is resumed in a new session from the
/// restart markers the client kept: only the missing ranges travel again.
#[test]
fn a_killed_upload_resumes_from_restart_markers() {
    let data = pattern(2_000_000, 3);
    let len = data.len() as u64;
    let setup = |p: &mut Pair| {
        p.send(Command::Type(TransferType::Image), Expect::Positive);
        p.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
        p.send(Command::Pasv, Expect::Passive);
        p.send(Command::Allo(Allo { size: len, record: None }), Expect::Positive);
    };
    let mut p = logged_in(Fs::default());
    p.server.chunk = 2048;
    p.data.up = vec![Pipe::default(); 4];
    encode_mode_e(&data, &whole(data.len()), 64 << 10, &mut p.data.up);
    setup(&mut p);
    p.send(Command::Stor("/big".into()), Expect::Completion);
    // Run until a few markers have come, then kill the client.
    p.drive_until(100_000, |ev| {
        ev.iter().filter(|e| matches!(e, ClientEvent::Marker { marker: Marker::Restart(_), .. })).count() >= 2
    });
    let record = p.restart_record();
    assert!(!record.is_empty() && record.covered() < len, "{record}");
    let fs = p.kill_client();
    assert!(!fs.files.contains_key("/big"), "a killed upload is not committed");
    assert!(fs.partial["/big"].have.covered() >= record.covered(), "markers report only what the server holds");

    let mut p = logged_in(fs);
    p.server.chunk = 1 << 20;
    p.data.up = vec![Pipe::default(); 4];
    let missing = record.missing(len);
    encode_mode_e(&data, &missing, 64 << 10, &mut p.data.up);
    let resent: u64 = missing.iter().map(|r| r.end - r.start).sum();
    setup(&mut p);
    p.send(Command::Rest(RestArg::Ranges(record.clone())), Expect::Restart);
    let stor = p.send(Command::Stor("/big".into()), Expect::Completion);
    let (r, ok, _) = p.wait(stor, 100_000);
    assert!(ok, "{r:?}");
    assert!(p.server.fs.files["/big"] == data, "the resumed file is whole");
    assert!(resent < len, "only the missing {resent} of {len} bytes were sent again");

    // Ranges the server does not hold are refused (554), and said so.
    let mut p = logged_in(Fs::default());
    setup(&mut p);
    p.send(Command::Rest(RestArg::Ranges(RangeSet::from_range(0..10))), Expect::Restart);
    let stor = p.send(Command::Stor("/other".into()), Expect::Completion);
    let (r, ok, _) = p.wait(stor, 100);
    assert!(!ok && r.code.get() == 554, "{r:?}");
    // The client's policy: forget the record, and try again from scratch.
    assert!(refutes_restart(&r) && worth_retrying(&r));
}

/// An upload whose data stops coming is aborted with ABOR: 426 for the
/// transfer, then 226 for the ABOR, each matched to its command.
#[test]
fn abor_during_a_stalled_upload() {
    let mut p = logged_in(Fs::default());
    p.data.up = vec![Pipe::default(); 1];
    p.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    p.send(Command::Pasv, Expect::Passive);
    let stor = p.send(Command::Stor("/stalled".into()), Expect::Completion);
    p.drive_until(100, |ev| ev.iter().any(|e| matches!(e, ClientEvent::Preliminary { .. })));
    let abor = p.send(Command::Abor, Expect::Completion);
    let (r, ok, _) = p.wait(stor, 100);
    assert!(!ok && r.code.get() == 426, "{r:?}");
    assert!(!ends_abort(&r), "the client's ABOR drain reads on past the 426");
    let (r, ok, _) = p.wait(abor, 100);
    assert!(ok && r.code.get() == 226, "{r:?}");
    assert!(ends_abort(&r));
    assert!(!p.server.fs.files.contains_key("/stalled"));
}

#[test]
fn listing_through_the_client_parser() {
    let mut fs = Fs::default();
    fs.files.insert("b".into(), vec![1]);
    fs.files.insert("a".into(), vec![2]);
    let mut p = logged_in(fs);
    p.send(Command::Pasv, Expect::Passive);
    let mlsd = p.send(Command::Mlsd(None), Expect::Completion);
    let (_, ok, _) = p.wait(mlsd, 100);
    assert!(ok);
    let bytes: Vec<u8> = p.data.stream_down.pop_front().expect("listing").bytes.into();
    let names: Vec<String> =
        ferry_proto::client::listing::parse_listing(&bytes, true).into_iter().map(|f| f.name).collect();
    assert_eq!(names, ["a", "b"]);
}

/// A MODE E third-party copy: the client commands two servers; the
/// destination listens (PASV), the source is told to connect to it (PORT)
/// and sends over four streams; the data never passes through the client.
#[test]
fn third_party_mode_e_between_two_servers() {
    let data = pattern(300_000, 9);
    let mut fs = Fs::default();
    fs.files.insert("/src.bin".into(), data.clone());
    let mut src = logged_in(fs);
    let mut dst = logged_in(Fs::default());
    // The destination first: its PASV reply says where the source connects.
    dst.data.up = vec![Pipe::default(); 4];
    dst.send(Command::Type(TransferType::Image), Expect::Positive);
    dst.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    let pasv = dst.send(Command::Pasv, Expect::Passive);
    dst.send(Command::Allo(Allo { size: data.len() as u64, record: None }), Expect::Positive);
    let stor = dst.send(Command::Stor("/dst.bin".into()), Expect::Completion);
    let (_, ok, addr) = dst.wait(pasv, 20);
    let Some(std::net::SocketAddr::V4(to)) = addr.filter(|_| ok) else { panic!("no passive address: {addr:?}") };
    src.send(Command::Type(TransferType::Image), Expect::Positive);
    src.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    src.send(Command::Opts(Opts::Retr(vec![("Parallelism".into(), "4,4,4".into())])), Expect::Positive);
    src.send(Command::Port(to), Expect::Positive);
    let retr = src.send(Command::Retr("/src.bin".into()), Expect::Completion);
    let (r, ok, _) = src.wait(retr, 100);
    assert!(ok, "{r:?}");
    // The source's connections are the destination's.
    assert_eq!(src.data.down.len(), 4);
    for (from, to) in src.data.down.iter_mut().zip(dst.data.up.iter_mut()) {
        to.bytes.extend(from.bytes.drain(..));
    }
    let (r, ok, _) = dst.wait(stor, 10_000);
    assert!(ok, "{r:?}");
    assert!(dst.server.fs.files["/dst.bin"] == data);
    assert_eq!(dst.restart_record(), RangeSet::from_range(0..data.len() as u64));
}

/// 100 MODE E downloads through the client's sliding window
/// ([`BatchWindow`], what `ferry-client`'s `retrieve_many` runs): the
/// set-up and the first 16 RETRs in one write, then one RETR for each file
/// completed, never more than 16 in flight, every file intact on the
/// cached connections.
#[test]
fn a_hundred_downloads_through_a_sliding_window() {
    use ferry_proto::client::BatchWindow;
    let mut fs = Fs::default();
    let files: Vec<(String, Vec<u8>)> =
        (0..100).map(|i| (format!("/win/{i:03}"), pattern(500 + i * 53, i as u8))).collect();
    for (path, data) in &files {
        fs.files.insert(path.clone(), data.clone());
    }
    let mut p = logged_in(fs);
    p.data.down = vec![Pipe::default(); 2];
    p.send(Command::Type(TransferType::Image), Expect::Positive);
    p.send(Command::Mode(TransferMode::ExtendedBlock), Expect::Positive);
    p.send(Command::Opts(Opts::Retr(vec![("Parallelism".into(), "2,2,2".into())])), Expect::Positive);
    p.send(Command::Port("127.0.0.1:50600".parse().unwrap()), Expect::Positive);
    let mut w = BatchWindow::new(files.len(), 16);
    let mut tags = std::collections::VecDeque::new();
    for j in w.to_send() {
        tags.push_back(p.send(Command::Retr(files[j].0.clone()), Expect::Completion));
    }
    assert_eq!(p.client.in_flight(), 4 + 16, "set-up and the first window, unsent yet");
    let writes_before = p.client_writes;
    p.step();
    assert_eq!(p.client_writes - writes_before, 1, "one write for the set-up and the window");
    while let Some(i) = w.current() {
        let tag = tags.pop_front().expect("a RETR per file in flight");
        let (r, ok, _) = p.wait(tag, 1000);
        assert!(ok, "{}: {r:?}", files[i].0);
        let (got, tracker) = decode_mode_e(&mut p.data.down, files[i].1.len());
        assert!(tracker.is_complete());
        assert_eq!(got, files[i].1, "{}", files[i].0);
        w.completed();
        for j in w.to_send() {
            tags.push_back(p.send(Command::Retr(files[j].0.clone()), Expect::Completion));
        }
        assert!(w.in_flight() <= 16 && p.client.in_flight() <= 16);
    }
    assert!(w.is_finished() && tags.is_empty());
    assert_eq!(p.client.in_flight(), 0);
}
