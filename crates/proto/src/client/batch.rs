//! Which files of a pipelined batch go out when: the window of transfer
//! commands kept in flight (globus-url-copy's `-pp`, Ferry's
//! `--pipeline`).
//!
//! A batch of `n` files sends the first `window` transfer commands with
//! its set-up in one write; each time a file completes, the command for
//! the file `window` places further goes out, so the server always has
//! the next files' commands queued when one ends and no file waits a
//! round trip. The window is pure bookkeeping — the socket-driving client
//! (`ferry-client`'s `retrieve_many`, `store_many`, `third_party_many`)
//! writes what [`to_send`](BatchWindow::to_send) names and reports each
//! [`completed`](BatchWindow::completed) file — so it is tested here
//! without sockets, and in `tests/pair` against a server session.

use std::ops::Range;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BatchWindow {
    total: usize,
    window: usize,
    sent: usize,
    done: usize,
}

impl BatchWindow {
    /// A batch of `total` files with up to `window` in flight (at least 1).
    pub fn new(total: usize, window: usize) -> Self {
        Self { total, window: window.max(1), sent: 0, done: 0 }
    }

    /// The files whose commands are to be written now (indices into the
    /// batch, in order): the first window at the start, then one for each
    /// file completed since the last call. Marks them sent.
    pub fn to_send(&mut self) -> Range<usize> {
        let upto = self.total.min(self.done + self.window);
        let r = self.sent..upto.max(self.sent);
        self.sent = r.end;
        r
    }

    /// The next file to complete: the oldest sent and not yet completed
    /// (replies come in the order of the commands, RFC 959 §4.2).
    pub fn current(&self) -> Option<usize> {
        (self.done < self.sent).then_some(self.done)
    }

    /// The oldest file in flight is complete.
    pub fn completed(&mut self) {
        debug_assert!(self.done < self.sent, "a file completed that was never sent");
        self.done = (self.done + 1).min(self.sent);
    }

    /// Files whose commands are written and not yet complete.
    pub fn in_flight(&self) -> usize {
        self.sent - self.done
    }

    /// Files complete so far.
    pub fn done(&self) -> usize {
        self.done
    }

    pub fn is_finished(&self) -> bool {
        self.done == self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_window_slides_one_file_per_completion() {
        let mut w = BatchWindow::new(5, 2);
        assert_eq!(w.to_send(), 0..2, "the first window goes with the set-up");
        assert_eq!(w.to_send(), 2..2, "nothing more until a file completes");
        assert_eq!(w.current(), Some(0));
        w.completed();
        assert_eq!(w.to_send(), 2..3);
        w.completed();
        w.completed();
        assert_eq!(w.in_flight(), 0);
        assert_eq!(w.to_send(), 3..5);
        w.completed();
        w.completed();
        assert_eq!(w.to_send(), 5..5);
        assert!(w.is_finished() && w.current().is_none());
    }

    #[test]
    fn a_window_of_zero_is_one_and_a_large_one_sends_all() {
        let mut w = BatchWindow::new(3, 0);
        assert_eq!(w.to_send(), 0..1);
        let mut w = BatchWindow::new(3, 100);
        assert_eq!(w.to_send(), 0..3);
        assert_eq!(BatchWindow::new(0, 4).to_send(), 0..0);
        assert!(BatchWindow::new(0, 4).is_finished());
    }
}
