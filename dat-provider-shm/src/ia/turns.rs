//! The order of upcalls across threads.
//!
//! Upcalls are collected while the state is locked and made after it is released (no
//! provider lock is held across an upcall). Two threads that both move data (the
//! application polling, the provider thread, a waiter in `Transport::block`) must still make
//! the upcalls of one endpoint in the order they were collected. A batch of upcalls therefore
//! takes the next *ticket* while the state is still locked, and is made once every batch with
//! an earlier ticket has been: [`Turns::wait`], then the returned [`Turn`] passes the turn on
//! when dropped.
//!
//! This replaces a delivery mutex taken before the state by every call that might make
//! upcalls: a poll that finds a message now takes one lock, not two (two atomic
//! read-modify-writes less), and a call that collects no upcall takes no ticket at all.
//! Taking a ticket is a plain increment under the state lock; passing the turn is one
//! release store by the only thread that holds it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Spins before a waiting thread starts yielding its CPU (two threads on one core: the one
/// whose turn it is must get to run).
const SPINS: u32 = 64;

/// Whose turn it is to make upcalls (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct Turns {
    /// The ticket whose batch may be made now: every earlier one has been.
    now: AtomicU64,
}

/// The tickets handed out so far; lives in the state (taken under its lock).
#[derive(Debug, Default)]
pub(crate) struct Tickets {
    next: u64,
}

impl Tickets {
    /// The next ticket, for a batch of upcalls collected under the state lock.
    pub(crate) fn take(&mut self) -> u64 {
        let t = self.next;
        self.next += 1;
        t
    }

    /// Tickets taken so far.
    pub(crate) fn issued(&self) -> u64 {
        self.next
    }
}

impl Turns {
    /// True if every batch collected so far has been made (`tickets` read under the state
    /// lock): nobody is making upcalls or waiting to.
    #[inline]
    pub(crate) fn idle(&self, tickets: &Tickets) -> bool {
        self.made() == tickets.next
    }

    /// Batches made so far: every ticket below this one (acquire: what those batches did
    /// happened before).
    #[inline]
    pub(crate) fn made(&self) -> u64 {
        self.now.load(Ordering::Acquire)
    }

    /// Waits until it is `ticket`'s turn (every earlier batch made); the turn passes on when
    /// the returned guard drops, also if an upcall panics.
    pub(crate) fn wait(&self, ticket: u64) -> Turn<'_> {
        let mut spins = 0u32;
        while self.now.load(Ordering::Acquire) != ticket {
            if spins < SPINS {
                spins += 1;
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        Turn {
            turns: self,
            ticket,
        }
    }
}

/// The turn to make upcalls, held until dropped.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    turns: &'a Turns,
    ticket: u64,
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        // Only the holder of the turn writes it: a store, no read-modify-write.
        self.turns.now.store(self.ticket + 1, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    #[test]
    fn batches_are_made_in_ticket_order_whatever_order_their_threads_get_there() {
        let turns = Arc::new(Turns::default());
        let mut tickets = Tickets::default();
        assert!(turns.idle(&tickets));
        let order = Arc::new(Mutex::new(Vec::new()));
        let ts: Vec<u64> = (0..4).map(|_| tickets.take()).collect();
        assert!(!turns.idle(&tickets));
        // The later tickets start first: each must wait for the earlier ones.
        let handles: Vec<_> = ts
            .iter()
            .rev()
            .map(|&t| {
                let (turns, order) = (turns.clone(), order.clone());
                std::thread::spawn(move || {
                    let _turn = turns.wait(t);
                    order.lock().unwrap().push(t);
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(*order.lock().unwrap(), ts);
        assert!(turns.idle(&tickets));
    }

    #[test]
    fn a_panicking_batch_passes_the_turn_on() {
        let turns = Arc::new(Turns::default());
        let mut tickets = Tickets::default();
        let first = tickets.take();
        let t2 = turns.clone();
        let r = std::thread::spawn(move || {
            let _turn = t2.wait(first);
            panic!("an upcall panicked");
        })
        .join();
        assert!(r.is_err());
        let second = tickets.take();
        drop(turns.wait(second));
        assert!(turns.idle(&tickets));
    }
}
