//! `DAT_EVENT`: what an EVD delivers, one variant per event stream (reference 2.5, 2.6).
//!
//! An [`Event`] pairs the ABI event number with typed data. The number decides the stream
//! (and so which EVDs may receive it); the data must be the variant that belongs to that
//! stream, which [`Event::is_well_formed`] checks. Every constructor builds a well-formed
//! event, so only hand-assembled events can be malformed, and the queue rejects those instead
//! of delivering data the consumer would misread.

use crate::types::{
    ConnQual, Cookie, CrId, DtoOp, DtoStatus, EpId, EvdFlags, EvdId, EventNumber, RmrId, SpId,
    SrqId,
};

/// The `reason` codes of `DAT_ASYNCH_ERROR_EVENT_DATA` (reference 2.6, `dat.h`).
///
/// The meaning depends on the kind of handle the event carries, which is why several
/// constants share a value.
pub mod reason {
    /// `DAT_IA_CATASTROPHIC_ERROR` (handle is the IA).
    pub const IA_CATASTROPHIC: i32 = 0;
    /// `DAT_IA_OTHER_ERROR` (handle is the IA).
    pub const IA_OTHER: i32 = 1;
    /// `DAT_EP_TRANSFER_TO_ERROR` (handle is an EP).
    pub const EP_TRANSFER_TO_ERROR: i32 = 0;
    /// `DAT_EP_OTHER_ERROR` (handle is an EP).
    pub const EP_OTHER: i32 = 1;
    /// `DAT_SRQ_SOFT_HIGH_WATERMARK_EVENT` (handle is an EP attached to an SRQ).
    pub const SRQ_SOFT_HIGH_WATERMARK: i32 = 2;
    /// `DAT_EVD_OVERFLOW_ERROR` (handle is an EVD).
    pub const EVD_OVERFLOW: i32 = 0;
    /// `DAT_EVD_OTHER_ERROR` (handle is an EVD).
    pub const EVD_OTHER: i32 = 1;
    /// `DAT_SRQ_TRANSFER_TO_ERROR` (handle is an SRQ).
    pub const SRQ_TRANSFER_TO_ERROR: i32 = 0;
    /// `DAT_SRQ_OTHER_ERROR` (handle is an SRQ).
    pub const SRQ_OTHER: i32 = 1;
    /// `DAT_SRQ_LOW_WATERMARK_EVENT` (handle is an SRQ).
    pub const SRQ_LOW_WATERMARK: i32 = 2;
}

/// `DAT_DTO_COMPLETION_EVENT_DATA`: the completion of a send, receive or RDMA post.
///
/// `transferred_length`, `operation` and `rmr_context` are meaningful only when `status` is
/// [`DtoStatus::Success`] (reference 2.6); unlike OFA, `operation` is always filled in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct DtoCompletion {
    /// The endpoint the work was posted on.
    pub ep: EpId,
    /// The consumer's cookie from the post, returned verbatim.
    pub cookie: Cookie,
    /// Completion status.
    pub status: DtoStatus,
    /// Bytes transferred (received bytes for a receive).
    pub transferred_length: u32,
    /// Which operation completed.
    pub operation: DtoOp,
    /// The invalidated `rmr_context` for `RECEIVE_WITH_INVALIDATE`, else 0.
    pub rmr_context: u32,
}

/// The object an asynchronous error event refers to (`dat_handle` of
/// `DAT_ASYNCH_ERROR_EVENT_DATA`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AsyncHandle {
    /// Unaffiliated error: the IA itself.
    Ia,
    /// Endpoint-affiliated error.
    Ep(EpId),
    /// EVD-affiliated error (for example the EVD that overflowed).
    Evd(EvdId),
    /// SRQ-affiliated error.
    Srq(SrqId),
}

/// The per-stream payload of a `DAT_EVENT` (the `event_data` union).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum EventData {
    /// `DAT_DTO_COMPLETION_EVENT_DATA` (DTO stream).
    Dto(DtoCompletion),
    /// `DAT_RMR_BIND_COMPLETION_EVENT_DATA` (RMR bind stream).
    RmrBind {
        /// The memory window that was bound.
        rmr: RmrId,
        /// The consumer's cookie from `dat_rmr_bind`.
        cookie: Cookie,
        /// Bind status (`Success` or `RmrOperationFailed`).
        status: DtoStatus,
    },
    /// `DAT_CR_ARRIVAL_EVENT_DATA` (CR stream); private data is read with `dat_cr_query`.
    ConnectionRequest {
        /// The service point the request arrived on.
        sp: SpId,
        /// The connection qualifier the peer asked for.
        conn_qual: ConnQual,
        /// The pending connection request.
        cr: CrId,
    },
    /// `DAT_CONNECTION_EVENT_DATA` (connection stream). ESTABLISHED on the active side and
    /// PEER_REJECTED carry the peer's private data; other events carry none.
    Connection {
        /// The endpoint whose connection changed.
        ep: EpId,
        /// The peer's private data (possibly empty).
        private_data: Box<[u8]>,
    },
    /// `DAT_ASYNCH_ERROR_EVENT_DATA` (async stream).
    Async {
        /// The affected object.
        handle: AsyncHandle,
        /// Object-specific reason, see [`reason`].
        reason: i32,
    },
    /// `DAT_SOFTWARE_EVENT_DATA` (software stream): the pointer given to `dat_evd_post_se`.
    Software {
        /// Opaque consumer value.
        pointer: u64,
    },
}

/// A `DAT_EVENT`: the event number and its data. The EVD handle is implied by the queue the
/// event is taken from.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Event {
    /// `event_number`.
    pub number: EventNumber,
    /// `event_data`.
    pub data: EventData,
}

impl Event {
    /// A `DAT_DTO_COMPLETION_EVENT`.
    #[inline]
    pub fn dto(c: DtoCompletion) -> Event {
        Event {
            number: EventNumber::DtoCompletion,
            data: EventData::Dto(c),
        }
    }

    /// A `DAT_RMR_BIND_COMPLETION_EVENT`.
    pub fn rmr_bind(rmr: RmrId, cookie: Cookie, status: DtoStatus) -> Event {
        Event {
            number: EventNumber::RmrBindCompletion,
            data: EventData::RmrBind {
                rmr,
                cookie,
                status,
            },
        }
    }

    /// A `DAT_CONNECTION_REQUEST_EVENT`.
    pub fn connection_request(sp: SpId, conn_qual: ConnQual, cr: CrId) -> Event {
        Event {
            number: EventNumber::ConnectionRequest,
            data: EventData::ConnectionRequest { sp, conn_qual, cr },
        }
    }

    /// A connection event `number` (one of the `DAT_CONNECTION_EVENT_*` numbers) for `ep`,
    /// carrying the peer's private data (pass an empty slice when there is none).
    ///
    /// A non-connection `number` yields an event that [`Event::is_well_formed`] rejects.
    pub fn connection(number: EventNumber, ep: EpId, private_data: impl Into<Box<[u8]>>) -> Event {
        Event {
            number,
            data: EventData::Connection {
                ep,
                private_data: private_data.into(),
            },
        }
    }

    /// An asynchronous error event `number` (one of the `DAT_ASYNC_ERROR_*` numbers).
    ///
    /// A non-async `number` yields an event that [`Event::is_well_formed`] rejects.
    pub fn async_error(number: EventNumber, handle: AsyncHandle, reason: i32) -> Event {
        Event {
            number,
            data: EventData::Async { handle, reason },
        }
    }

    /// `DAT_ASYNC_ERROR_EVD_OVERFLOW`, posted on the async EVD when another EVD could not
    /// queue an event. The header asks for the overflowing EVD as the handle
    /// (`AsyncHandle::Evd`); OFA passes the IA instead. The reason is `DAT_EVD_OVERFLOW_ERROR`.
    pub fn evd_overflow(handle: AsyncHandle) -> Event {
        Event::async_error(EventNumber::AsyncEvdOverflow, handle, reason::EVD_OVERFLOW)
    }

    /// A `DAT_SOFTWARE_EVENT` carrying `pointer`.
    pub fn software(pointer: u64) -> Event {
        Event {
            number: EventNumber::Software,
            data: EventData::Software { pointer },
        }
    }

    /// The event stream (EVD flag) this event belongs to, from its number.
    #[inline]
    pub fn stream(&self) -> EvdFlags {
        self.number.stream()
    }

    /// True if the data variant is the one the event number's stream carries. Malformed events
    /// are never queued.
    #[inline]
    pub fn is_well_formed(&self) -> bool {
        let s = self.stream();
        match self.data {
            EventData::Dto(_) => s == EvdFlags::DTO,
            EventData::RmrBind { .. } => s == EvdFlags::RMR_BIND,
            EventData::ConnectionRequest { .. } => s == EvdFlags::CR,
            EventData::Connection { .. } => s == EvdFlags::CONNECTION,
            EventData::Async { .. } => s == EvdFlags::ASYNC,
            EventData::Software { .. } => s == EvdFlags::SOFTWARE,
        }
    }

    /// The endpoint the event concerns, if any (DTO completions, connection events and
    /// EP-affiliated async errors). Used to drain the events of a freed or reset EP.
    pub fn ep(&self) -> Option<EpId> {
        match self.data {
            EventData::Dto(c) => Some(c.ep),
            EventData::Connection { ep, .. } => Some(ep),
            EventData::Async {
                handle: AsyncHandle::Ep(ep),
                ..
            } => Some(ep),
            _ => None,
        }
    }

    /// True for a DTO or RMR bind completion whose status is not success. Such completions
    /// always notify a waiter, whatever the completion flags said (see [`super::Signal`]).
    #[inline]
    pub fn is_failed_completion(&self) -> bool {
        match self.data {
            EventData::Dto(c) => c.status != DtoStatus::Success,
            EventData::RmrBind { status, .. } => status != DtoStatus::Success,
            _ => false,
        }
    }

    /// True for DTO and RMR bind completions (the events completion flags apply to).
    #[inline]
    pub fn is_completion(&self) -> bool {
        matches!(self.data, EventData::Dto(_) | EventData::RmrBind { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dto(ep: u32, status: DtoStatus) -> Event {
        Event::dto(DtoCompletion {
            ep: EpId(ep),
            cookie: Cookie(7),
            status,
            transferred_length: 10,
            operation: DtoOp::Send,
            rmr_context: 0,
        })
    }

    #[test]
    fn constructors_build_well_formed_events_of_the_right_stream() {
        let cases: [(Event, EventNumber, EvdFlags); 7] = [
            (
                dto(1, DtoStatus::Success),
                EventNumber::DtoCompletion,
                EvdFlags::DTO,
            ),
            (
                Event::rmr_bind(RmrId(1), Cookie(2), DtoStatus::Success),
                EventNumber::RmrBindCompletion,
                EvdFlags::RMR_BIND,
            ),
            (
                Event::connection_request(SpId(1), ConnQual(45248), CrId(3)),
                EventNumber::ConnectionRequest,
                EvdFlags::CR,
            ),
            (
                Event::connection(EventNumber::Established, EpId(1), vec![1, 2, 3]),
                EventNumber::Established,
                EvdFlags::CONNECTION,
            ),
            (
                Event::connection(EventNumber::PeerRejected, EpId(1), &[9u8][..]),
                EventNumber::PeerRejected,
                EvdFlags::CONNECTION,
            ),
            (
                Event::evd_overflow(AsyncHandle::Evd(EvdId(4))),
                EventNumber::AsyncEvdOverflow,
                EvdFlags::ASYNC,
            ),
            (
                Event::software(0xdead),
                EventNumber::Software,
                EvdFlags::SOFTWARE,
            ),
        ];
        for (ev, number, stream) in cases {
            assert_eq!(ev.number, number);
            assert_eq!(ev.stream(), stream);
            assert!(ev.is_well_formed(), "{ev:?}");
        }
    }

    #[test]
    fn mismatched_number_and_data_are_malformed() {
        assert!(
            !Event::connection(EventNumber::DtoCompletion, EpId(1), Vec::new()).is_well_formed()
        );
        assert!(!Event::async_error(EventNumber::Broken, AsyncHandle::Ia, 0).is_well_formed());
        let mut ev = Event::software(1);
        ev.number = EventNumber::DtoCompletion;
        assert!(!ev.is_well_formed());
    }

    #[test]
    fn private_data_and_overflow_reason_are_carried() {
        let ev = Event::connection(EventNumber::Established, EpId(5), vec![1, 2, 3]);
        assert_eq!(
            ev.data,
            EventData::Connection {
                ep: EpId(5),
                private_data: vec![1, 2, 3].into_boxed_slice()
            }
        );
        assert_eq!(
            Event::evd_overflow(AsyncHandle::Ia).data,
            EventData::Async {
                handle: AsyncHandle::Ia,
                reason: 0
            }
        );
    }

    #[test]
    fn ep_of_an_event() {
        assert_eq!(dto(3, DtoStatus::Success).ep(), Some(EpId(3)));
        assert_eq!(
            Event::connection(EventNumber::Disconnected, EpId(4), Vec::new()).ep(),
            Some(EpId(4))
        );
        assert_eq!(
            Event::async_error(
                EventNumber::AsyncEpBroken,
                AsyncHandle::Ep(EpId(6)),
                reason::EP_TRANSFER_TO_ERROR
            )
            .ep(),
            Some(EpId(6))
        );
        assert_eq!(
            Event::async_error(EventNumber::AsyncIaCatastrophic, AsyncHandle::Ia, 0).ep(),
            None
        );
        assert_eq!(Event::software(1).ep(), None);
        assert_eq!(
            Event::connection_request(SpId(1), ConnQual(1), CrId(1)).ep(),
            None
        );
    }

    #[test]
    fn failed_completions() {
        assert!(!dto(1, DtoStatus::Success).is_failed_completion());
        assert!(dto(1, DtoStatus::Flushed).is_failed_completion());
        assert!(
            Event::rmr_bind(RmrId(1), Cookie(0), DtoStatus::RmrOperationFailed)
                .is_failed_completion()
        );
        assert!(!Event::software(0).is_failed_completion());
        assert!(dto(1, DtoStatus::Success).is_completion());
        assert!(!Event::software(0).is_completion());
    }
}
