//! Abrupt IA close: every child is freed, endpoints first (they reference everything else).

use std::sync::Weak;

use crate::cm::Sp;
use crate::cno::Cno;
use crate::ep::Ep;
use crate::evd::Evd;
use crate::ia::IaInner;
use crate::mem::{Lmr, Pz};
use crate::srq::Srq;

pub(crate) fn free_children(ia: &IaInner) {
    let (sps, eps, srqs, lmrs, pzs, evds, cnos) = {
        let mut c = ia.children();
        c.crs.clear();
        fn take<T>(m: &mut std::collections::HashMap<u32, Weak<T>>) -> Vec<std::sync::Arc<T>> {
            m.drain().filter_map(|(_, w)| w.upgrade()).collect()
        }
        (
            take(&mut c.sps),
            take(&mut c.eps),
            take(&mut c.srqs),
            take(&mut c.lmrs),
            take(&mut c.pzs),
            take(&mut c.evds),
            take(&mut c.cnos),
        )
    };
    for inner in sps {
        Sp { inner }.free_unchecked();
    }
    for inner in eps {
        let ep = Ep { inner };
        let _ = ia
            .transport
            .disconnect(ep.id(), dat_core::types::CloseFlags::Abrupt);
        ep.inner.destroy();
    }
    for inner in srqs {
        Srq { inner }.free_unchecked();
    }
    for inner in lmrs {
        Lmr { inner }.free_unchecked();
    }
    for inner in pzs {
        Pz { inner }.free_unchecked();
    }
    for inner in evds {
        Evd { inner }.free_unchecked();
    }
    for inner in cnos {
        Cno { inner }.free_unchecked();
    }
    ia.async_evd.free_unchecked();
}
