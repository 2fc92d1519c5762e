//! Handle validation through the provider table, as libdat2 would call it: NULL, garbage,
//! foreign and stale handles give `DAT_INVALID_HANDLE` with the right subtype, never a crash;
//! every slot is callable; an open IA answers what the stock test programs ask.

use std::ffi::c_void;
use std::ptr::{null, null_mut};

use dat_capi::abi::*;

const INVALID_HANDLE: u32 = 0x8005_0000;
const fn bad(sub: u32) -> u32 {
    INVALID_HANDLE | sub
}
const IA: u32 = 11;
const EP: u32 = 12;
const LMR: u32 = 13;
const RMR: u32 = 14;
const PZ: u32 = 15;
const PSP: u32 = 16;
const RSP: u32 = 17;
const CR: u32 = 18;
const CNO: u32 = 19;
const EVD_REQUEST: u32 = 21;
const SRQ: u32 = 25;

fn table() -> &'static DatProvider {
    let t = dat_capi::register_for_tests("rs-test", "tcp-lo");
    assert!(!t.is_null());
    // SAFETY: the registry keeps the table alive until dat_provider_fini, never called here.
    unsafe { &*t }
}

/// Opens the test IA: `(ia, async_evd)`.
fn open(t: &DatProvider) -> (DatHandle, DatHandle) {
    let mut ia: DatHandle = null_mut();
    let mut aevd: DatHandle = null_mut();
    // SAFETY: valid name and OUT pointers.
    let rc = unsafe { (t.ia_open_func)(c"rs-test".as_ptr(), 8, &mut aevd, &mut ia) };
    assert_eq!(rc, 0, "rc {rc:#x}");
    assert!(!ia.is_null() && !aevd.is_null());
    (ia, aevd)
}

/// Handles that must be rejected: NULL, misaligned, a pointer to foreign memory, a small
/// integer (what libdat2 gives consumers for IAs).
fn bogus() -> Vec<DatHandle> {
    let foreign = Box::leak(Box::new([0u64; 8]));
    vec![
        null_mut(),
        3usize as DatHandle,
        (foreign.as_mut_ptr() as usize + 1) as DatHandle,
        foreign.as_mut_ptr().cast(),
        1usize as DatHandle,
    ]
}

#[test]
fn bogus_handles_give_invalid_handle_with_the_subtype() {
    let t = table();
    for h in bogus() {
        // SAFETY: every call is made with arguments the C ABI allows (bogus handles included:
        // validating them is the point).
        unsafe {
            let mut out: DatHandle = null_mut();
            let mut ev: DatEvent = std::mem::zeroed();
            assert_eq!((t.pz_create_func)(h, &mut out), bad(IA));
            assert_eq!((t.ia_close_func)(h, 0), bad(IA));
            assert_eq!((t.pz_free_func)(h), bad(PZ));
            assert_eq!((t.ep_free_func)(h), bad(EP));
            assert_eq!((t.ep_reset_func)(h), bad(EP));
            assert_eq!((t.lmr_free_func)(h), bad(LMR));
            assert_eq!((t.rmr_free_func)(h), bad(RMR));
            assert_eq!((t.psp_free_func)(h), bad(PSP));
            assert_eq!((t.rsp_free_func)(h), bad(RSP));
            assert_eq!((t.cr_reject_func)(h, 0, null_mut()), bad(CR));
            assert_eq!((t.cno_free_func)(h), bad(CNO));
            assert_eq!((t.evd_free_func)(h), bad(EVD_REQUEST));
            assert_eq!((t.evd_dequeue_func)(h, &mut ev), bad(EVD_REQUEST));
            assert_eq!((t.srq_free_func)(h), bad(SRQ));
            let mut ty = 99u32;
            assert_eq!((t.get_handle_type_func)(h, &mut ty), bad(27));
            assert_eq!(ty, 99);
        }
    }
}

#[test]
fn unsupported_slots_answer_without_touching_arguments() {
    let t = table();
    // SAFETY: these slots ignore their arguments.
    unsafe {
        assert_eq!(
            (t.handle_extendedop_func)(null_mut(), 0, null_mut()),
            0x3FFF_0000
        );
        assert_eq!((t.csp_free_func)(null_mut()), 0x0009_0000);
        assert_eq!(
            (t.ep_common_connect_func)(null_mut(), null_mut(), 0, 0, null_mut()),
            0x0009_0000
        );
        assert_eq!((t.cno_trigger_func)(null_mut(), null_mut()), 0x3FFF_0000);
        assert_eq!(
            (t.ia_ha_related_func)(null_mut(), null_mut(), null_mut()),
            0x0009_0000
        );
    }
}

#[test]
fn every_slot_is_a_callable_function() {
    let t = table();
    // SAFETY: DatProvider is 81 pointer-sized words; reading them as usize is defined.
    let words: &[usize; 81] = unsafe { &*(t as *const DatProvider).cast::<[usize; 81]>() };
    assert!(words[2..].iter().all(|w| *w != 0));
    // SAFETY: device_name is the NUL-terminated registered name.
    let name = unsafe { std::ffi::CStr::from_ptr(t.device_name) };
    assert_eq!(name.to_str(), Ok("rs-test"));
}

#[test]
fn open_arguments_are_checked() {
    let t = table();
    let mut ia: DatHandle = null_mut();
    let mut evd: DatHandle = null_mut();
    let before = dat_capi::handle::live_count();
    // An unregistered name.
    // SAFETY: valid name and OUT pointers.
    let rc = unsafe { (t.ia_open_func)(c"nobody".as_ptr(), 8, &mut evd, &mut ia) };
    assert_eq!(rc, 0x800A_0064);
    assert!(ia.is_null() && evd.is_null());
    assert_eq!(dat_capi::handle::live_count(), before);
    // NULL arguments.
    // SAFETY: NULLs are what is being checked.
    unsafe {
        assert_eq!(
            (t.ia_open_func)(null_mut(), 8, &mut evd, &mut ia),
            0x8006_0025
        );
        assert_eq!(
            (t.ia_open_func)(c"rs-test".as_ptr(), 8, &mut evd, null_mut()),
            0x8006_0028
        );
    }
}

/// What the stock test programs ask of an open IA (dapltest FFT queryinfo/mem, dtestsrq,
/// dtest's RDMA writes), on the loopback tcp IA.
#[test]
fn an_open_ia_answers_the_stock_programs() {
    let t = table();
    let (ia, _) = open(t);
    // SAFETY: every pointer handed over is valid for the call (or NULL where NULL is the
    // point); the handles come from the calls above.
    unsafe {
        // ia_query: asked-for fields need somewhere to go.
        let mut pattr: DatProviderAttr = std::mem::zeroed();
        let mut iattr: DatIaAttr = std::mem::zeroed();
        assert_eq!(
            (t.ia_query_func)(ia, null_mut(), u64::MAX, null_mut(), u64::MAX, &mut pattr),
            0x8006_0028
        );
        assert_eq!(
            (t.ia_query_func)(ia, null_mut(), u64::MAX, &mut iattr, u64::MAX, null_mut()),
            0x8006_002A
        );
        assert_eq!(
            (t.ia_query_func)(ia, null_mut(), 0, null_mut(), u64::MAX, &mut pattr),
            0
        );
        // DAT_IB_TRANSPORT_MTU is listed (dtestsrq reads it).
        let n = usize::try_from(pattr.num_provider_specific_attr).unwrap();
        let list = std::slice::from_raw_parts(pattr.provider_specific_attr, n);
        let mtu = list
            .iter()
            .find(|a| std::ffi::CStr::from_ptr(a.name).to_bytes() == b"DAT_IB_TRANSPORT_MTU")
            .map(|a| {
                std::ffi::CStr::from_ptr(a.value)
                    .to_str()
                    .unwrap()
                    .to_owned()
            });
        assert_eq!(mtu.as_deref(), Some("4096"));

        let mut pz: DatHandle = null_mut();
        assert_eq!((t.pz_create_func)(ia, &mut pz), 0);
        // A zero-length registration is a length error (dapltest FFT mem case 2).
        let mut lmr: DatHandle = null_mut();
        let region = DatRegionDescription { for_va: null_mut() };
        let rc = (t.lmr_create_func)(
            ia,
            0,
            region,
            0,
            pz,
            0x33,
            0,
            &mut lmr,
            null_mut(),
            null_mut(),
            null_mut(),
            null_mut(),
        );
        assert_eq!(rc, 0x8008_0000);
        assert!(lmr.is_null());

        // RDMA IOV limits left 0 (as dtest does) mean max_request_iov.
        let mut evd: DatHandle = null_mut();
        assert_eq!((t.evd_create_func)(ia, 8, null_mut(), 0x20, &mut evd), 0);
        let mut ep: DatHandle = null_mut();
        assert_eq!(
            (t.ep_create_func)(ia, pz, evd, evd, null_mut(), null(), &mut ep),
            0
        );
        let mut p: DatEpParam = std::mem::zeroed();
        assert_eq!((t.ep_query_func)(ep, u64::MAX, &mut p), 0);
        let mut a = p.ep_attr;
        a.max_request_iov = 2;
        a.max_rdma_read_iov = 0;
        a.max_rdma_write_iov = 0;
        let mut ep2: DatHandle = null_mut();
        assert_eq!(
            (t.ep_create_func)(ia, pz, evd, evd, null_mut(), &a, &mut ep2),
            0
        );
        let mut p2: DatEpParam = std::mem::zeroed();
        assert_eq!((t.ep_query_func)(ep2, u64::MAX, &mut p2), 0);
        assert_eq!(
            (p2.ep_attr.max_rdma_read_iov, p2.ep_attr.max_rdma_write_iov),
            (2, 2)
        );
        assert_eq!((t.ep_free_func)(ep2), 0);
        assert_eq!((t.ep_free_func)(ep), 0);
        assert_eq!((t.evd_free_func)(evd), 0);
        assert_eq!((t.pz_free_func)(pz), 0);
        assert_eq!((t.ia_close_func)(ia, 0), 0);
    }
}

#[test]
fn event_and_context_arguments_are_checked() {
    let t = table();
    let mut ctx = DatContext::from_u64(7);
    // SAFETY: bogus handles are rejected before any pointer is used.
    unsafe {
        assert_eq!((t.set_consumer_context_func)(null_mut(), ctx), bad(27));
        assert_eq!(
            (t.get_consumer_context_func)(8 as *mut c_void, &mut ctx),
            bad(27)
        );
    }
    assert_eq!(ctx.value(), 7);
}

/// `DAT_SRQ_LOW_WATERMARK_EVENT` reaches a C consumer: the async EVD gives the SRQ's own
/// handle and reason 2. A watermark given at creation fires at once on the empty queue; a
/// second `dat_srq_set_lw` re-arms it; 0 and a negative or too large value do not.
#[test]
fn srq_low_watermark_reaches_the_async_evd() {
    let t = table();
    let (ia, aevd) = open(t);
    // SAFETY: every pointer handed over is valid for the call; the handles come from the
    // calls above; the union member read is the one the event number selects.
    unsafe {
        let mut pz: DatHandle = null_mut();
        assert_eq!((t.pz_create_func)(ia, &mut pz), 0);
        let mut attr = DatSrqAttr {
            max_recv_dtos: 4,
            max_recv_iov: 1,
            low_watermark: 1,
        };
        let mut srq: DatHandle = null_mut();
        assert_eq!((t.srq_create_func)(ia, pz, &mut attr, &mut srq), 0);
        let expect_event = || {
            let mut ev: DatEvent = std::mem::zeroed();
            assert_eq!((t.evd_dequeue_func)(aevd, &mut ev), 0);
            // DAT_ASYNC_ERROR_EP_BROKEN: OFA's number for affiliated events.
            assert_eq!(ev.event_number, 0x08003);
            let d = ev.event_data.asynch_error_event_data;
            assert_eq!((d.dat_handle, d.reason), (srq, 2));
        };
        let mut ev: DatEvent = std::mem::zeroed();
        expect_event();
        assert_eq!((t.evd_dequeue_func)(aevd, &mut ev), 0x000D_0000);
        assert_eq!((t.srq_set_lw_func)(srq, 1), 0);
        expect_event();
        assert_eq!((t.srq_set_lw_func)(srq, 0), 0);
        assert_eq!((t.srq_set_lw_func)(srq, -1), 0x8006_0026);
        assert_eq!((t.srq_set_lw_func)(srq, 5), 0x8006_0026);
        assert_eq!((t.evd_dequeue_func)(aevd, &mut ev), 0x000D_0000);
        assert_eq!((t.srq_free_func)(srq), 0);
        assert_eq!((t.pz_free_func)(pz), 0);
        assert_eq!((t.ia_close_func)(ia, 0), 0);
    }
}

/// Addresses inside the handle table that are not live handles of the expected kind: inside a
/// slot, beyond the slots handed out (memory never touched), before the table, freed slots,
/// and live handles of another kind.
#[test]
fn addresses_inside_the_handle_table_are_checked() {
    let t = table();
    let (ia, _) = open(t);
    // SAFETY: the handles come from the calls above; the other addresses are what is being
    // checked and must never be dereferenced by the library.
    unsafe {
        let mut pz: DatHandle = null_mut();
        assert_eq!((t.pz_create_func)(ia, &mut pz), 0);
        let mut evd: DatHandle = null_mut();
        assert_eq!((t.evd_create_func)(ia, 8, null_mut(), 0x20, &mut evd), 0);
        let mut ep: DatHandle = null_mut();
        assert_eq!(
            (t.ep_create_func)(ia, pz, evd, evd, null_mut(), null(), &mut ep),
            0
        );
        let at = |h: DatHandle, off: isize| h.cast::<u8>().wrapping_offset(off).cast::<c_void>();
        for h in [
            at(pz, 8),
            at(pz, 16),
            at(ep, 32),
            at(ep, 64 << 20),
            at(ep, 255 << 20),
            // Not the slot just before `ia`: the tests of this file run in parallel, and that
            // slot may be another test's live handle (freeing it broke that test).
            at(ia, -(64 << 20)),
        ] {
            assert_eq!((t.pz_free_func)(h), bad(PZ), "{h:?}");
            assert_eq!((t.ep_free_func)(h), bad(EP), "{h:?}");
            assert_eq!((t.ia_close_func)(h, 0), bad(IA), "{h:?}");
            let mut ty = 99u32;
            assert_eq!((t.get_handle_type_func)(h, &mut ty), bad(27));
        }
        // Live handles of another kind.
        assert_eq!((t.pz_free_func)(ep), bad(PZ));
        assert_eq!((t.ep_free_func)(pz), bad(EP));
        assert_eq!(
            (t.ep_post_send_func)(evd, 0, null_mut(), DatContext { as_64: 0 }, 0),
            bad(EP)
        );
        // A freed handle: poisoned, its provider word still readable by libdat2, rejected.
        let provider = *ep.cast::<*const DatProvider>();
        assert_eq!((t.ep_free_func)(ep), 0);
        assert_eq!(*ep.cast::<*const DatProvider>(), provider);
        assert_eq!(*ep.cast::<u32>().add(2), dat_capi::handle::POISON);
        assert_eq!((t.ep_free_func)(ep), bad(EP));
        assert_eq!(
            (t.ep_post_send_func)(ep, 0, null_mut(), DatContext { as_64: 0 }, 0),
            bad(EP)
        );
        let mut st = 0u32;
        assert_eq!(
            (t.ep_get_status_func)(ep, &mut st, null_mut(), null_mut()),
            bad(EP)
        );
        assert_eq!((t.evd_free_func)(evd), 0);
        assert_eq!((t.pz_free_func)(pz), 0);
        assert_eq!((t.pz_free_func)(pz), bad(PZ));
        assert_eq!((t.ia_close_func)(ia, 0), 0);
        assert_eq!((t.pz_create_func)(ia, &mut pz), bad(IA));
    }
}

/// A handle freed while another thread keeps using it: every call gives success or
/// `DAT_INVALID_HANDLE|EP`, never a crash, and once the free returned only the error.
#[test]
fn a_handle_freed_under_a_concurrent_user() {
    let t = table();
    let (ia, _) = open(t);
    let mut pz: DatHandle = null_mut();
    let mut ep: DatHandle = null_mut();
    // SAFETY: valid handles and OUT pointers.
    unsafe {
        assert_eq!((t.pz_create_func)(ia, &mut pz), 0);
        assert_eq!(
            (t.ep_create_func)(ia, pz, null_mut(), null_mut(), null_mut(), null(), &mut ep),
            0
        );
    }
    let freed = std::sync::atomic::AtomicBool::new(false);
    // The user's first success: the free waits for it (a fixed pause let a loaded machine
    // free the handle before the user thread ever ran, and `ok > 0` failed).
    let answered = std::sync::atomic::AtomicBool::new(false);
    let h = ep as usize;
    std::thread::scope(|s| {
        let user = s.spawn(|| {
            let (mut ok, mut bad_after) = (0u32, 0u32);
            loop {
                let done = freed.load(std::sync::atomic::Ordering::Acquire);
                let mut st = 0u32;
                // SAFETY: a valid OUT pointer; the handle may be freed meanwhile (the point).
                let rc = unsafe {
                    (t.ep_get_status_func)(h as DatHandle, &mut st, null_mut(), null_mut())
                };
                match rc {
                    0 => {
                        assert!(!done, "a freed handle answered");
                        ok += 1;
                        answered.store(true, std::sync::atomic::Ordering::Release);
                    }
                    rc => {
                        assert_eq!(rc, bad(EP));
                        if done {
                            bad_after += 1;
                            if bad_after > 100 {
                                return ok;
                            }
                        }
                    }
                }
            }
        });
        // Bounded: a handle that never answers is caught by `ok > 0` below.
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while !answered.load(std::sync::atomic::Ordering::Acquire)
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        // Some more concurrent calls before the free.
        std::thread::sleep(std::time::Duration::from_millis(5));
        // SAFETY: a live handle.
        let rc = unsafe { (t.ep_free_func)(h as DatHandle) };
        // Told before the check, so that a failed free fails the test instead of hanging it.
        freed.store(true, std::sync::atomic::Ordering::Release);
        assert_eq!(rc, 0);
        assert!(user.join().unwrap() > 0);
    });
    // SAFETY: live handles.
    unsafe {
        assert_eq!((t.pz_free_func)(pz), 0);
        assert_eq!((t.ia_close_func)(ia, 0), 0);
    }
}

/// Two threads call `call` on `h` in a loop while the test frees it with `free`: every call
/// answers as a live handle would (anything but `bad_rc`) or `bad_rc`, and only `bad_rc` once
/// the free returned; both threads had live answers first.
fn race_a_free(
    h: DatHandle,
    call: &(dyn Fn(DatHandle) -> u32 + Sync),
    bad_rc: u32,
    free: &dyn Fn(DatHandle) -> u32,
) {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    let freed = AtomicBool::new(false);
    let answered = AtomicU32::new(0);
    let h = h as usize;
    std::thread::scope(|s| {
        let users: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let (mut ok, mut bad_after) = (0u32, 0u32);
                    loop {
                        let done = freed.load(Ordering::Acquire);
                        let rc = call(h as DatHandle);
                        if rc == bad_rc {
                            if done {
                                bad_after += 1;
                                if bad_after > 100 {
                                    return ok;
                                }
                            }
                        } else {
                            assert!(!done, "a freed handle answered {rc:#x}");
                            if ok == 0 {
                                answered.fetch_add(1, Ordering::Release);
                            }
                            ok += 1;
                        }
                    }
                })
            })
            .collect();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while answered.load(Ordering::Acquire) < 2 && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
        let rc = free(h as DatHandle);
        freed.store(true, Ordering::Release);
        assert_eq!(rc, 0);
        for u in users {
            assert!(u.join().unwrap() > 0);
        }
    });
}

/// The DTO posts and `dat_evd_dequeue` use their handle in place, without a reference count
/// (`handle::hold`): a free racing them waits for the calls inside, and later calls are
/// rejected.
#[test]
fn in_place_lookups_racing_a_free() {
    let t = table();
    let (ia, _) = open(t);
    let (mut pz, mut evd, mut ep) = (null_mut(), null_mut(), null_mut());
    // SAFETY: valid handles and OUT pointers.
    unsafe {
        assert_eq!((t.pz_create_func)(ia, &mut pz), 0);
        assert_eq!((t.evd_create_func)(ia, 8, null_mut(), 0x20, &mut evd), 0);
        assert_eq!(
            (t.ep_create_func)(ia, pz, null_mut(), null_mut(), null_mut(), null(), &mut ep),
            0
        );
    }
    let dequeue = |h: DatHandle| {
        // SAFETY: DatEvent is plain data; a valid OUT pointer; `h` may be freed (the point).
        unsafe {
            let mut ev: DatEvent = std::mem::zeroed();
            (t.evd_dequeue_func)(h, &mut ev)
        }
    };
    // SAFETY: a live handle.
    race_a_free(evd, &dequeue, bad(EVD_REQUEST), &|h| unsafe {
        (t.evd_free_func)(h)
    });
    let post = |h: DatHandle| {
        // SAFETY: no segments; `h` may be freed (the point).
        unsafe { (t.ep_post_send_func)(h, 0, null_mut(), DatContext { as_64: 0 }, 0) }
    };
    // SAFETY: a live handle.
    race_a_free(ep, &post, bad(EP), &|h| unsafe { (t.ep_free_func)(h) });
    // SAFETY: live handles.
    unsafe {
        assert_eq!((t.pz_free_func)(pz), 0);
        assert_eq!((t.ia_close_func)(ia, 0), 0);
    }
}
