//! The implementations behind the 79 table slots, one module per object family. Every
//! function validates its handles through [`crate::handle`], checks C-only arguments (NULL
//! pointers, negative counts, unknown enum values: `DAT_INVALID_PARAMETER|DAT_INVALID_ARGn`
//! with the 1-based argument position) and maps the call onto the `dat` API, whose errors are
//! already the DAT codes.

pub mod cm;
pub mod convert;
pub mod ep;
pub mod evd;
pub mod ia;
pub mod mem;
pub mod misc;
pub mod srq;

use std::sync::Arc;

use dat::{DatError, DatResult, Subtype};

use crate::abi::DatHandle;
use crate::handle::{self, Kind, Node, Obj};
use crate::state::IaState;

/// The IA behind a raw IA handle.
pub(crate) fn ia_of(h: DatHandle) -> DatResult<Arc<IaState>> {
    let n = handle::get(
        h,
        Kind::Ia,
        DatError::invalid_handle(Subtype::InvalidHandleIa),
    )?;
    match &n.obj {
        Obj::Ia(s) => Ok(s.clone()),
        _ => Err(DatError::invalid_handle(Subtype::InvalidHandleIa)),
    }
}

/// A live node of `kind`, else `DAT_INVALID_HANDLE|sub`.
pub(crate) fn node(h: DatHandle, kind: Kind, sub: Subtype) -> DatResult<Arc<Node>> {
    handle::get(h, kind, DatError::invalid_handle(sub))
}

/// Like [`node`], but NULL is allowed (`None`).
pub(crate) fn opt_node(h: DatHandle, kind: Kind, sub: Subtype) -> DatResult<Option<Arc<Node>>> {
    if h.is_null() {
        return Ok(None);
    }
    node(h, kind, sub).map(Some)
}

macro_rules! getter {
    ($name:ident, $variant:ident, $ty:ty, $kind:ident, $sub:ident) => {
        /// The object behind a handle of this kind.
        pub(crate) fn $name(h: DatHandle) -> DatResult<(Arc<Node>, $ty)> {
            let n = node(h, Kind::$kind, Subtype::$sub)?;
            match &n.obj {
                Obj::$variant(o) => {
                    let o = o.clone();
                    Ok((n, o))
                }
                _ => Err(DatError::invalid_handle(Subtype::$sub)),
            }
        }
    };
}

getter!(pz_of, Pz, dat::Pz, Pz, InvalidHandlePz);
getter!(evd_of, Evd, dat::Evd, Evd, InvalidHandleEvdRequest);
getter!(cno_of, Cno, dat::Cno, Cno, InvalidHandleCno);
getter!(ep_of, Ep, dat::Ep, Ep, InvalidHandleEp);
getter!(psp_of, Psp, dat::Sp, Psp, InvalidHandlePsp);
getter!(rsp_of, Rsp, dat::Sp, Rsp, InvalidHandleRsp);
getter!(cr_of, Cr, dat::Cr, Cr, InvalidHandleCr);
getter!(srq_of, Srq, dat::Srq, Srq, InvalidHandleSrq);
getter!(rmr_of, Rmr, dat::Rmr, Rmr, InvalidHandleRmr);

/// An EVD handle in an argument role (`sub` names the role), NULL allowed.
pub(crate) fn opt_evd(h: DatHandle, sub: Subtype) -> DatResult<Option<dat::Evd>> {
    match opt_node(h, Kind::Evd, sub)? {
        None => Ok(None),
        Some(n) => match &n.obj {
            Obj::Evd(e) => Ok(Some(e.clone())),
            _ => Err(DatError::invalid_handle(sub)),
        },
    }
}

/// The LMR behind a handle.
pub(crate) fn lmr_of(h: DatHandle) -> DatResult<(Arc<Node>, dat::Lmr, mem::LmrOrigin)> {
    let n = node(h, Kind::Lmr, Subtype::InvalidHandleLmr)?;
    match &n.obj {
        Obj::Lmr(l, o) => {
            let (l, o) = (l.clone(), *o);
            Ok((n, l, o))
        }
        _ => Err(DatError::invalid_handle(Subtype::InvalidHandleLmr)),
    }
}
