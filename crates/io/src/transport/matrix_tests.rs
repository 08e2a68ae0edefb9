//! The MODE E matrix over the in-memory transport: the production send and
//! receive loops (`crate::mode_e`) with 1, 4 and 8 streams, connections
//! accepted out of order, blocks arriving out of order, channels cached
//! across files, a transfer cut by a stall and resumed from what the
//! receiver recorded (what its restart markers report), and checksums of
//! both ends compared. Deterministic: the faults are injected, not raced.

use super::memory::{Faults, Memory};
use super::{ChannelOptions, DataConn, DataListener, Transport};
use crate::checksum::Checksum;
use crate::endpoint::{BlockSink, MemorySink};
use crate::mode_e::{self, ReceiveSpec, ReceiveState, SendPlan, TransferControl};
use crate::stream::CopyError;
use ferry_proto::RangeSet;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;

fn pattern(len: usize, seed: usize) -> Vec<u8> {
    (0..len).map(|i| ((i * 7 + seed * 13) % 251) as u8).collect()
}

fn sha256(data: &[u8]) -> String {
    let mut c = Checksum::new("SHA256").expect("SHA256");
    c.update(data);
    c.finish_hex()
}

/// A memory sink that also records the offset of every write, in order.
#[derive(Default)]
struct RecordingSink {
    inner: MemorySink,
    offsets: Mutex<Vec<u64>>,
}

impl BlockSink for RecordingSink {
    fn write_at(&self, data: &[u8], offset: u64) -> io::Result<()> {
        self.offsets.lock().unwrap().push(offset);
        self.inner.write_at(data, offset)
    }
}

/// One side's connections and the other side's acceptor, as the server
/// and the client wire them: the sender connects (GFD.20), the receiver
/// accepts every connection into the running transfer.
struct Channel {
    transport: Memory,
    listener: Arc<dyn DataListener>,
    opts: ChannelOptions,
}

impl Channel {
    fn new(faults: Faults, timeout: Duration) -> Self {
        let transport = Memory::new(faults);
        let opts = ChannelOptions::new(timeout);
        let listener = transport.listen("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        Self { transport, listener, opts }
    }

    async fn connect(&self, n: usize) -> Vec<DataConn> {
        let addr = self.listener.local_addr().unwrap();
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(self.transport.connect(addr, None, &self.opts).await.unwrap());
        }
        out
    }

    /// Feeds accepted connections to a receive.
    fn acceptor(&self) -> (tokio::task::JoinHandle<()>, mpsc::Receiver<DataConn>) {
        let (tx, rx) = mpsc::channel(16);
        let (l, opts) = (self.listener.clone(), self.opts.clone());
        let task = tokio::spawn(async move {
            while let Ok((c, _)) = l.accept(&opts, None).await {
                if tx.send(c).await.is_err() {
                    break;
                }
            }
        });
        (task, rx)
    }
}

struct Outcome {
    sent: Result<Vec<DataConn>, CopyError>,
    received: Result<Vec<DataConn>, CopyError>,
    state: Arc<ReceiveState>,
}

/// Sends `data` by `plan` over `senders` (plus new connections up to
/// `streams`) into `sink`, with `initial` cached connections on the
/// receiving side.
#[allow(clippy::too_many_arguments)]
async fn transfer(
    ch: &Channel,
    data: Arc<Vec<u8>>,
    plan: SendPlan,
    mut senders: Vec<DataConn>,
    initial: Vec<DataConn>,
    streams: usize,
    sink: Arc<dyn BlockSink>,
    timeout: Duration,
) -> Outcome {
    let (acceptor, mut rx) = ch.acceptor();
    let missing = streams.saturating_sub(senders.len());
    senders.extend(ch.connect(missing).await);
    let send = tokio::task::spawn_blocking(move || mode_e::send(senders, &*data, &plan, &TransferControl::new()));
    let state = Arc::new(ReceiveState::default());
    let spec = ReceiveSpec::new(0, None);
    let received = mode_e::receive(initial, &mut rx, sink, spec, state.clone(), TransferControl::new(), timeout).await;
    acceptor.abort();
    Outcome { sent: send.await.unwrap(), received, state }
}

#[tokio::test(flavor = "multi_thread")]
async fn every_stream_count_with_and_without_reordered_accepts_delivers_every_byte() {
    for streams in [1usize, 4, 8] {
        for reorder_accepts in [false, true] {
            let faults = Faults { reorder_accepts, capacity: 64 << 10, ..Faults::default() };
            let ch = Channel::new(faults, Duration::from_secs(20));
            let data = Arc::new(pattern(3_000_017, streams));
            let plan = SendPlan::whole(data.len() as u64, 65536);
            let sink = Arc::new(MemorySink::default());
            let o = transfer(
                &ch,
                data.clone(),
                plan,
                Vec::new(),
                Vec::new(),
                streams,
                sink.clone(),
                Duration::from_secs(20),
            )
            .await;
            assert_eq!(o.sent.unwrap().len(), streams);
            assert_eq!(o.received.unwrap().len(), streams, "every connection is kept for the next file");
            assert_eq!(o.state.received.lock().unwrap().to_string(), format!("0-{}", data.len()));
            let got = Arc::try_unwrap(sink).unwrap().into_inner();
            assert_eq!(sha256(&got), sha256(&data), "{streams} streams, reordered accepts {reorder_accepts}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn blocks_held_back_on_one_stream_arrive_last_and_land_in_place() {
    let len = 1_000_000usize;
    // The first connection (which carries block 0) writes nothing until
    // the other three have carried 400 kB.
    let faults = Faults { hold_first_until: Some(400_000), capacity: 64 << 10, ..Faults::default() };
    let ch = Channel::new(faults, Duration::from_secs(20));
    let data = Arc::new(pattern(len, 3));
    let plan = SendPlan::whole(len as u64, 50_000);
    let sink = Arc::new(RecordingSink::default());
    let o = transfer(&ch, data.clone(), plan, Vec::new(), Vec::new(), 4, sink.clone(), Duration::from_secs(20)).await;
    o.sent.unwrap();
    o.received.unwrap();
    let offsets = sink.offsets.lock().unwrap().clone();
    assert_ne!(offsets.first(), Some(&0), "block 0 was held back: {offsets:?}");
    assert!(offsets.windows(2).any(|w| w[1] < w[0]), "out of order: {offsets:?}");
    let sink = Arc::try_unwrap(sink).ok().unwrap();
    assert!(sink.inner.into_inner() == *data);
}

#[tokio::test(flavor = "multi_thread")]
async fn cached_channels_carry_the_next_files() {
    let ch = Channel::new(Faults::default(), Duration::from_secs(20));
    let (mut senders, mut receivers) = (Vec::new(), Vec::new());
    for (i, len) in [200_000usize, 0, 1_234_567, 5].into_iter().enumerate() {
        let data = Arc::new(pattern(len, i));
        let plan = SendPlan::whole(len as u64, 32768);
        let sink = Arc::new(MemorySink::default());
        let o = transfer(&ch, data.clone(), plan, senders, receivers, 4, sink.clone(), Duration::from_secs(20)).await;
        senders = o.sent.unwrap();
        receivers = o.received.unwrap();
        assert_eq!((senders.len(), receivers.len()), (4, 4), "file {i}: the same four connections");
        assert!(Arc::try_unwrap(sink).unwrap().into_inner() == *data, "file {i}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_transfer_resumes_from_what_the_receiver_recorded() {
    let len = 2_000_000usize;
    let data = Arc::new(pattern(len, 9));
    let sink = Arc::new(MemorySink::default());
    // Every connection stalls after 300 kB: the sender's writes and the
    // receiver's reads time out, and part of the file has arrived.
    let faults = Faults { stall_after: Some(300_000), capacity: 64 << 10, ..Faults::default() };
    let ch = Channel::new(faults, Duration::from_millis(300));
    let plan = SendPlan::whole(len as u64, 65536);
    let o =
        transfer(&ch, data.clone(), plan, Vec::new(), Vec::new(), 4, sink.clone(), Duration::from_millis(300)).await;
    assert!(o.sent.is_err() && o.received.is_err());
    let held: RangeSet = o.state.received.lock().unwrap().clone();
    assert!(!held.is_empty() && held.missing(len as u64).iter().map(|r| r.end - r.start).sum::<u64>() > 0, "{held}");
    // The resume: only what is missing travels, over a healthy channel.
    let ch = Channel::new(Faults::default(), Duration::from_secs(20));
    let plan = SendPlan::missing(len as u64, &held, 65536);
    let o = transfer(&ch, data.clone(), plan, Vec::new(), Vec::new(), 4, sink.clone(), Duration::from_secs(20)).await;
    o.sent.unwrap();
    o.received.unwrap();
    let mut all = held.clone();
    all.union(&o.state.received.lock().unwrap());
    assert_eq!(all.to_string(), format!("0-{len}"));
    let got = Arc::try_unwrap(sink).unwrap().into_inner();
    assert_eq!(sha256(&got), sha256(&data));
}
