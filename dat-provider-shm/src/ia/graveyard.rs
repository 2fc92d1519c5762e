//! The upcalls of endpoints removed while batches of upcalls that may name them are pending.
//!
//! The completion of a message received names its endpoint's upcalls by address
//! ([`UpcallsRef`](crate::conn::UpcallsRef)) instead of cloning their `Arc`: an atomic
//! increment when it is collected and a decrement when it has been made, two full barriers
//! per message on the receiver's critical path. A batch of upcalls is made after the state
//! lock is released (see `turns`), so an endpoint removed from the state in between must not
//! take its upcalls with it: its removal puts them here, with the number of tickets issued so
//! far, and they go once every batch ticketed before the removal has been made. A batch made
//! inline by a thread already making upcalls runs within that thread's turn, so it is covered
//! too.
//!
//! Kept upcalls are let go of at the next removal of an endpoint and by the provider thread's
//! next pass (it passes right after making a batch of its own), at the latest with the IA's
//! state. Nothing is kept unless an endpoint is removed while another thread makes upcalls.

use std::sync::Arc;

use dat_core::provider::EpUpcalls;

/// Upcalls kept for pending batches (see the module docs).
#[derive(Default)]
pub(crate) struct Graveyard {
    /// Each with the tickets issued when its endpoint was removed: it may go once that many
    /// batches have been made.
    kept: Vec<(u64, Arc<dyn EpUpcalls>)>,
}

impl Graveyard {
    /// Takes the upcalls of an endpoint just removed: dropped now if every batch ticketed so
    /// far (`issued`) has been made (`made`), else kept until then. Lets go of the ones kept
    /// earlier whose batches are done.
    pub(crate) fn bury(&mut self, upcalls: Arc<dyn EpUpcalls>, issued: u64, made: u64) {
        self.sweep(made);
        if issued > made {
            self.kept.push((issued, upcalls));
        }
    }

    /// Lets go of the upcalls whose batches have all been made (`made` of them so far).
    pub(crate) fn sweep(&mut self, made: u64) {
        self.kept.retain(|(issued, _)| *issued > made);
    }

    /// True if nothing is kept.
    pub(crate) fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use dat_core::provider::{CmFact, Completion};

    use super::*;

    struct Nop;
    impl EpUpcalls for Nop {
        fn completion(&self, _: Completion) {}
        fn cm(&self, _: CmFact) {}
        fn retired(&self, _: u32) {}
    }

    #[test]
    fn upcalls_stay_until_every_batch_ticketed_before_their_removal_is_made() {
        let mut g = Graveyard::default();
        let u: Arc<dyn EpUpcalls> = Arc::new(Nop);
        let weak = Arc::downgrade(&u);
        // Tickets 0..3 issued, 0 and 1 made: the batches 2 may still name them.
        g.bury(u, 3, 2);
        assert!(weak.upgrade().is_some() && !g.is_empty());
        g.sweep(2);
        assert!(weak.upgrade().is_some(), "batch 2 is not made yet");
        g.sweep(3);
        assert!(weak.upgrade().is_none() && g.is_empty());
        // Nothing pending: dropped at once.
        let u: Arc<dyn EpUpcalls> = Arc::new(Nop);
        let weak = Arc::downgrade(&u);
        g.bury(u, 5, 5);
        assert!(weak.upgrade().is_none() && g.is_empty());
    }
}
