//! GridFTP behaviour checked on the wire with a raw client, for what no
//! peer program sends: ESTO, MODE E REST ranges on RETR, TREV markers,
//! delayed passive ordering, and a small passive port range surviving many
//! stream-mode transfers (where Globus slows down 3.8×).

mod support;
use ferry_proto::mode_e::{BlockDecoder, BlockHeader};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use support::*;

fn pasv_addr(reply: &str) -> SocketAddr {
    let inner = reply.split('(').nth(1).unwrap().split(')').next().unwrap();
    let n: Vec<u16> = inner.split(',').map(|x| x.trim().parse().unwrap()).collect();
    format!("{}.{}.{}.{}:{}", n[0], n[1], n[2], n[3], n[4] * 256 + n[5]).parse().unwrap()
}

fn block(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut v = BlockHeader::data(offset, data.len() as u64).encode().to_vec();
    v.extend_from_slice(data);
    v
}

#[test]
fn esto_writes_at_an_offset_and_never_truncates() {
    let server = FerryServer::start();
    std::fs::write(server.path("f.bin"), vec![b'.'; 2000]).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    assert!(c.cmd("TYPE I").starts_with("200"));
    assert!(c.cmd("MODE E").starts_with("200"));
    let addr = pasv_addr(&c.cmd("PASV"));
    c.send(b"ESTO A 1000 /f.bin");
    let mut d = TcpStream::connect(addr).unwrap();
    assert!(c.reply().starts_with("150"));
    // Blocks are numbered from the ESTO offset, out of order.
    d.write_all(&block(5, b"WORLD")).unwrap();
    d.write_all(&block(0, b"HELLO")).unwrap();
    d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    let mut rest = String::new();
    loop {
        let r = c.reply();
        let last = r.starts_with("226");
        rest.push_str(&r);
        if last || r.is_empty() {
            break;
        }
    }
    assert!(rest.contains("111 Range Marker 0-10"), "{rest}");
    let got = std::fs::read(server.path("f.bin")).unwrap();
    assert_eq!(got.len(), 2000, "ESTO must not truncate");
    assert_eq!(&got[1000..1010], b"HELLOWORLD");
    assert!(got[..1000].iter().chain(&got[1010..]).all(|b| *b == b'.'));
}

#[test]
fn mode_e_retr_with_rest_ranges_sends_only_the_holes_with_absolute_offsets() {
    let server = FerryServer::start();
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(server.path("f.bin"), &data).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    c.cmd("TYPE I");
    c.cmd("MODE E");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let p = listener.local_addr().unwrap().port();
    assert!(c.cmd(&format!("PORT 127,0,0,1,{},{}", p >> 8, p & 255)).starts_with("200"));
    assert!(c.cmd("REST 0-1000,2000-99000").starts_with("350"));
    c.send(b"RETR /f.bin");
    let (mut d, _) = listener.accept().unwrap();
    assert!(c.reply().starts_with("150"));
    let mut dec = BlockDecoder::default();
    let mut got = ferry_proto::RangeSet::new();
    let mut buf = [0u8; 65536];
    'read: loop {
        let n = d.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed before EOF");
        dec.push(&buf[..n]);
        while let Some(b) = dec.next_block(None).unwrap() {
            if b.header.is_eof() {
                assert_eq!(b.header.offset, 1, "EODC");
                break 'read;
            }
            let o = b.header.offset as usize;
            assert_eq!(b.payload, data[o..o + b.payload.len()]);
            got.insert(b.header.offset..b.header.offset + b.header.count);
        }
    }
    assert_eq!(got.to_string(), "1000-2000,99000-100000");
    assert!(c.reply().starts_with("226"));
    // The channel is cached: the next RETR reuses it (125).
    c.send(b"RETR /f.bin");
    assert!(c.reply().starts_with("125"));
}

#[test]
fn trev_sets_marker_frequency_and_markers_have_globus_format() {
    let server = FerryServer::start_with(&["--anonymous", "read", "--max-transfer-rate", "4M"]);
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    c.cmd("TYPE I");
    c.cmd("MODE E");
    assert!(c.cmd("TREV PERF 1").starts_with("200"));
    assert!(c.cmd("TREV RESTART 1").starts_with("200"));
    let addr = pasv_addr(&c.cmd("PASV"));
    assert!(c.cmd("ALLO 10000000").starts_with("200"));
    c.send(b"STOR /m.bin");
    let mut d = TcpStream::connect(addr).unwrap();
    let sender = std::thread::spawn(move || {
        let chunk = vec![7u8; 1 << 20];
        for i in 0..9u64 {
            d.write_all(&block(i << 20, &chunk)).unwrap();
        }
        d.write_all(&block(9 << 20, &chunk[..10_000_000 - (9 << 20)])).unwrap();
        d.write_all(&BlockHeader::eof(1).encode()).unwrap();
    });
    let mut perf = 0;
    let mut ranges = ferry_proto::RangeSet::new();
    loop {
        let r = c.reply();
        assert!(!r.is_empty(), "control closed");
        if r.starts_with("112-") {
            perf += 1;
            // Two spaces after the colon and one decimal: globus-url-copy
            // drops the marker otherwise.
            let ts = r.lines().find(|l| l.contains("Timestamp:")).unwrap();
            assert!(ts.starts_with(" Timestamp:  ") && ts.rsplit('.').next().unwrap().trim().len() == 1, "{ts}");
            assert!(r.contains(" Stripe Index: 0\r\n") && r.contains(" Total Stripe Count: 1\r\n"), "{r}");
        } else if let Some(rest) = r.strip_prefix("111 Range Marker ") {
            let new = ferry_proto::RangeSet::parse(rest.trim()).unwrap();
            assert!(new.difference(&ranges) == new, "a 111 marker repeated ranges: {rest}");
            ranges.union(&new);
        } else if r.starts_with("226") {
            break;
        } else {
            assert!(r.starts_with("150"), "{r}");
        }
    }
    sender.join().unwrap();
    assert!(perf >= 3, "{perf} perf markers in ~2.5 s at 1 s intervals");
    assert_eq!(ranges.to_string(), "0-10000000", "the union of the 111 markers covers the file");
}

#[test]
fn delayed_passive_announces_the_port_before_150() {
    let server = FerryServer::start();
    std::fs::write(server.path("f.bin"), b"delayed").unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    c.cmd("TYPE I");
    assert!(c.cmd("OPTS PASV AllowDelayed=1;").starts_with("200"));
    assert_eq!(c.cmd("PASV"), "200 Passive delayed.\r\n");
    c.send(b"RETR /f.bin");
    let announce = c.reply();
    assert!(announce.starts_with("127 Entering Passive Mode ("), "{announce}");
    let mut d = TcpStream::connect(pasv_addr(&announce)).unwrap();
    assert!(c.reply().starts_with("150"));
    let mut got = Vec::new();
    d.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"delayed");
    assert!(c.reply().starts_with("226"));
}

#[test]
fn a_small_passive_port_range_serves_many_stream_mode_transfers() {
    // Five ports for 300 transfers: each PASV must find a free port at
    // once even though earlier ports sit in TIME-WAIT.
    let base = free_port().min(65000);
    let range = format!("{}-{}", base, base + 4);
    let server = FerryServer::start_with(&["--anonymous", "read", "--passive-ports", &range]);
    std::fs::write(server.path("s.bin"), vec![1u8; 4096]).unwrap();
    let mut c = RawControl::connect(server.addr);
    c.login(ALICE);
    c.cmd("TYPE I");
    let mut ports = std::collections::BTreeSet::new();
    for _ in 0..300 {
        let r = c.cmd("PASV");
        assert!(r.starts_with("227"), "{r}");
        let addr = pasv_addr(&r);
        assert!((base..=base + 4).contains(&addr.port()), "{addr} outside {range}");
        ports.insert(addr.port());
        let mut d = TcpStream::connect(addr).unwrap();
        c.send(b"RETR /s.bin");
        assert!(c.reply().starts_with("150"));
        let mut got = Vec::new();
        d.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), 4096);
        assert!(c.reply().starts_with("226"));
    }
    assert!(ports.len() >= 2, "the allocator rotates through the range: {ports:?}");
}
