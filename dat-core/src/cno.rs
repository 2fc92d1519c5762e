//! Consumer notification objects (CNO): pure trigger/wait logic (reference 1.2, 6.5).
//!
//! A CNO aggregates the notifications of the EVDs attached to it. An EVD triggers its CNO when
//! a notifying event arrives while the EVD is enabled and nobody waits on the EVD itself (the
//! EVD queue decides that and names the CNO in `Push::Queued::trigger_cno`); the facade then
//! calls [`CnoState::trigger`] with the EVD's id, wakes the CNO waiter if told to and calls the
//! proxy agent if [`CnoState::on_trigger`] returns one.
//!
//! `dat_cno_wait` is [`CnoState::begin_wait`], then a loop of
//! [`CnoState::try_complete_wait`] / [`CnoState::wait_status`] / block, then
//! [`CnoState::end_wait`] whatever the outcome; on timeout it returns
//! [`CnoState::timeout_error`].
//!
//! States: UNTRIGGERED → TRIGGERED on a trigger, back to UNTRIGGERED when a wait consumes the
//! trigger; DEAD once freed or its IA closed ([`CnoState::kill`]), which is final.

use crate::error::{DatError, DatResult, Subtype};
use crate::types::EvdId;

/// The trigger state of a CNO.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CnoTrigger {
    /// No notification pending.
    #[default]
    Untriggered,
    /// A notification is pending; the next wait returns at once.
    Triggered,
    /// Freed or its IA closed: waits fail with `DAT_INVALID_STATE_CNO_DEAD`.
    Dead,
}

/// `DAT_PROXY_TYPE`, as `dat_cno_query` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum ProxyType {
    /// `DAT_PROXY_TYPE_NONE`: no agent.
    None = 0,
    /// `DAT_PROXY_TYPE_AGENT`: an OS wait proxy agent.
    Agent = 1,
    /// `DAT_PROXY_TYPE_FD`: signalled through a file descriptor (`dat_cno_fd_create`).
    Fd = 2,
}

/// A `DAT_OS_WAIT_PROXY_AGENT`, opaque to the core: (instance data, function). The facade
/// gives the two words their meaning and makes the call.
pub type Agent = (u64, u64);

/// What the facade does after [`CnoState::on_trigger`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TriggerAction {
    /// Wake the registered waiter.
    pub wake: bool,
    /// Call this proxy agent with the triggering EVD (only on the transition to TRIGGERED,
    /// once per notification, as OFA does).
    pub agent: Option<Agent>,
}

/// One CNO: trigger state, the triggering EVD, the single waiter, the attached-EVD count and
/// the proxy agent.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CnoState {
    state: CnoTrigger,
    /// The EVD whose trigger is pending (the first since the last consumed trigger).
    evd: Option<EvdId>,
    waiter: bool,
    attached: u32,
    agent: Option<Agent>,
}

impl CnoState {
    /// A new, untriggered CNO without agent (`dat_cno_create` with
    /// `DAT_OS_WAIT_PROXY_AGENT_NULL`).
    pub fn new() -> CnoState {
        CnoState::default()
    }

    /// A new, untriggered CNO with a proxy agent.
    pub fn with_agent(agent: Option<Agent>) -> CnoState {
        CnoState {
            agent,
            ..CnoState::default()
        }
    }

    /// `dat_cno_modify_agent`.
    pub fn set_agent(&mut self, agent: Option<Agent>) {
        self.agent = agent;
    }

    /// The proxy agent.
    pub fn agent(&self) -> Option<Agent> {
        self.agent
    }

    /// `proxy_type` for `dat_cno_query`.
    pub fn proxy_type(&self) -> ProxyType {
        if self.agent.is_some() {
            ProxyType::Agent
        } else {
            ProxyType::None
        }
    }

    /// The trigger state.
    pub fn state(&self) -> CnoTrigger {
        self.state
    }

    /// `evd` triggered this CNO; returns whether to wake the waiter.
    pub fn trigger(&mut self, evd: EvdId) -> bool {
        self.on_trigger(evd).wake
    }

    /// `evd` triggered this CNO: becomes TRIGGERED (remembering `evd` if no other EVD's
    /// trigger is pending) and says whether to wake the waiter and which agent to call.
    /// A dead CNO ignores triggers.
    pub fn on_trigger(&mut self, evd: EvdId) -> TriggerAction {
        let newly = match self.state {
            CnoTrigger::Dead => {
                return TriggerAction {
                    wake: false,
                    agent: None,
                };
            }
            CnoTrigger::Triggered => false,
            CnoTrigger::Untriggered => {
                self.state = CnoTrigger::Triggered;
                self.evd = Some(evd);
                true
            }
        };
        TriggerAction {
            wake: self.waiter,
            agent: if newly { self.agent } else { None },
        }
    }

    /// Starts a `dat_cno_wait`: registers the waiter.
    ///
    /// # Errors
    /// * `DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_DEAD`: the CNO was freed or its IA closed.
    /// * `DAT_INVALID_STATE` (no subtype): another thread is already waiting.
    pub fn begin_wait(&mut self) -> DatResult<()> {
        self.wait_status()?;
        if self.waiter {
            return Err(DatError::invalid_state(Subtype::NoSubtype));
        }
        self.waiter = true;
        Ok(())
    }

    /// Completes the wait if triggered: consumes the trigger (back to UNTRIGGERED) and returns
    /// the triggering EVD, `Some(None)` if none is known. `None` while untriggered or dead
    /// (then see [`CnoState::wait_status`]). Does not end the wait: call
    /// [`CnoState::end_wait`].
    pub fn try_complete_wait(&mut self) -> Option<Option<EvdId>> {
        match self.state {
            CnoTrigger::Triggered => {
                self.state = CnoTrigger::Untriggered;
                Some(self.evd.take())
            }
            CnoTrigger::Untriggered | CnoTrigger::Dead => None,
        }
    }

    /// What a woken waiter that did not complete must do: keep waiting (`Ok`) or fail.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_DEAD` once the CNO is dead.
    pub fn wait_status(&self) -> DatResult<()> {
        if self.state == CnoTrigger::Dead {
            Err(DatError::invalid_state(Subtype::StateCnoDead))
        } else {
            Ok(())
        }
    }

    /// The waiter leaves (success, timeout, interrupt or error).
    pub fn end_wait(&mut self) {
        self.waiter = false;
    }

    /// True while a waiter is registered.
    pub fn has_waiter(&self) -> bool {
        self.waiter
    }

    /// An EVD was attached (`dat_evd_create` with this CNO, `dat_evd_modify_cno`).
    pub fn attach(&mut self) {
        self.attached = self.attached.saturating_add(1);
    }

    /// An EVD was detached (freed, or moved to another CNO). Never goes below zero.
    pub fn detach(&mut self) {
        self.attached = self.attached.saturating_sub(1);
    }

    /// Number of attached EVDs.
    pub fn attached(&self) -> u32 {
        self.attached
    }

    /// Whether `dat_cno_free` may proceed.
    ///
    /// # Errors
    /// `DAT_INVALID_STATE | DAT_INVALID_STATE_CNO_IN_USE` while EVDs are attached.
    pub fn check_free(&self) -> DatResult<()> {
        if self.attached > 0 {
            Err(DatError::invalid_state(Subtype::StateCnoInUse))
        } else {
            Ok(())
        }
    }

    /// The CNO is freed or its IA closed: DEAD for good, any pending trigger dropped. Returns
    /// whether a waiter is registered, which the caller must wake (it then fails with
    /// `CNO_DEAD`).
    pub fn kill(&mut self) -> bool {
        self.state = CnoTrigger::Dead;
        self.evd = None;
        self.waiter
    }

    /// True once killed.
    pub fn is_dead(&self) -> bool {
        self.state == CnoTrigger::Dead
    }

    /// What `dat_cno_wait` returns when its timeout expires: the spec's
    /// `DAT_TIMEOUT_EXPIRED` (with the error class), the same code as `dat_evd_wait`, not
    /// OFA's `DAT_QUEUE_EMPTY`. Consumers (dtest) treat any failure alike.
    pub fn timeout_error() -> DatError {
        DatError::TIMEOUT_EXPIRED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const E1: EvdId = EvdId(1);
    const E2: EvdId = EvdId(2);
    const DEAD: u32 = 0x8007_0044;
    const IN_USE: u32 = 0x8007_0043;

    #[test]
    fn new_is_untriggered_without_agent() {
        let c = CnoState::new();
        assert_eq!(c.state(), CnoTrigger::Untriggered);
        assert_eq!(c.proxy_type(), ProxyType::None);
        assert_eq!(c.agent(), None);
        assert_eq!(c.attached(), 0);
        assert!(!c.has_waiter() && !c.is_dead());
        assert_eq!(c.wait_status(), Ok(()));
    }

    #[test]
    fn trigger_then_wait_returns_the_evd_and_rearms() {
        let mut c = CnoState::new();
        assert!(!c.trigger(E1), "no waiter to wake");
        assert_eq!(c.state(), CnoTrigger::Triggered);
        assert_eq!(c.begin_wait(), Ok(()));
        assert_eq!(c.try_complete_wait(), Some(Some(E1)));
        assert_eq!(c.state(), CnoTrigger::Untriggered);
        assert_eq!(c.try_complete_wait(), None);
        c.end_wait();
        assert!(!c.has_waiter());
    }

    #[test]
    fn a_blocked_waiter_is_woken_by_a_trigger() {
        let mut c = CnoState::new();
        assert_eq!(c.begin_wait(), Ok(()));
        assert_eq!(c.try_complete_wait(), None);
        assert!(c.trigger(E2));
        assert_eq!(c.try_complete_wait(), Some(Some(E2)));
        c.end_wait();
    }

    #[test]
    fn the_first_pending_evd_is_reported() {
        let mut c = CnoState::new();
        c.trigger(E1);
        c.trigger(E2);
        assert_eq!(c.try_complete_wait(), Some(Some(E1)));
        assert_eq!(c.try_complete_wait(), None);
        c.trigger(E2);
        assert_eq!(c.try_complete_wait(), Some(Some(E2)));
    }

    #[test]
    fn agent_is_called_once_per_notification() {
        let agent = (0x1000, 0x2000);
        let mut c = CnoState::with_agent(Some(agent));
        assert_eq!(c.proxy_type(), ProxyType::Agent);
        assert_eq!(
            c.on_trigger(E1),
            TriggerAction {
                wake: false,
                agent: Some(agent)
            }
        );
        assert_eq!(
            c.on_trigger(E2),
            TriggerAction {
                wake: false,
                agent: None
            }
        );
        c.try_complete_wait();
        c.set_agent(None);
        assert_eq!(c.proxy_type(), ProxyType::None);
        assert_eq!(c.on_trigger(E1).agent, None);
    }

    #[test]
    fn only_one_waiter() {
        let mut c = CnoState::new();
        assert_eq!(c.begin_wait(), Ok(()));
        assert_eq!(c.begin_wait().map_err(DatError::to_raw), Err(0x8007_0000));
        c.end_wait();
        assert_eq!(c.begin_wait(), Ok(()));
    }

    #[test]
    fn attach_refcount_governs_free() {
        let mut c = CnoState::new();
        assert_eq!(c.check_free(), Ok(()));
        c.attach();
        c.attach();
        assert_eq!(c.attached(), 2);
        assert_eq!(c.check_free().map_err(DatError::to_raw), Err(IN_USE));
        c.detach();
        assert_eq!(c.check_free().map_err(DatError::to_raw), Err(IN_USE));
        c.detach();
        assert_eq!(c.check_free(), Ok(()));
        c.detach();
        assert_eq!(c.attached(), 0, "detach saturates");
    }

    #[test]
    fn kill_is_final_and_wakes_the_waiter_with_cno_dead() {
        let mut c = CnoState::new();
        assert_eq!(c.begin_wait(), Ok(()));
        c.trigger(E1);
        assert!(c.kill(), "waiter must be woken");
        assert!(c.is_dead());
        assert_eq!(c.state(), CnoTrigger::Dead);
        assert_eq!(c.try_complete_wait(), None, "pending trigger dropped");
        assert_eq!(c.wait_status().map_err(DatError::to_raw), Err(DEAD));
        c.end_wait();
        assert_eq!(c.begin_wait().map_err(DatError::to_raw), Err(DEAD));
        assert!(!c.trigger(E1));
        assert_eq!(c.on_trigger(E1).agent, None);
        assert_eq!(c.state(), CnoTrigger::Dead);
        assert!(!c.kill(), "no waiter left");
    }

    #[test]
    fn timeout_is_the_spec_code() {
        assert_eq!(CnoState::timeout_error().to_raw(), 0x800F_0000);
    }
}
