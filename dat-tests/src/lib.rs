//! # dat-tests: one conformance suite for every provider
//!
//! The cases ([`cases`]) are written once against the public `dat` API and run against any
//! [`Target`]: the in-memory [`FabricTarget`] (always available, deterministic), or an IA of
//! the user's configuration through [`RegistryTarget`] (`tcp-lo`, `shm0`, or whatever
//! `$DAT_TEST_IA` names). [`conformance_suite!`] expands to one `#[test]` per case:
//!
//! ```ignore
//! dat_tests::conformance_suite!(fabric, dat_tests::FabricTarget::new());
//! dat_tests::conformance_suite!(tcp, dat_tests::RegistryTarget::new("tcp-lo"));
//! ```
//!
//! A case asserts exact return codes, event numbers, event contents and data; it fails by
//! panicking, and a case needing a capability the target does not advertise returns
//! [`Outcome::Skip`] with the reason, which is reported (never a silent pass).

pub mod cases;
pub mod harness;
pub mod peer;
pub mod target;

pub use target::{FabricTarget, RegistryTarget, Target};

/// What a case concluded (a failure panics instead).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every assertion held.
    Pass,
    /// The target lacks what the case needs; the reason says what.
    Skip(String),
}

/// Locks a mutex, ignoring poisoning (a failed case must not fail the others).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Runs one case against `target` and reports a skip (with its reason) on stderr and through
/// `tracing`. `module` is the `module_path!()` of the suite module (it locates the hidden
/// peer test for multi-process cases).
///
/// # Panics
/// When the case fails.
pub fn run_case(
    target: &dyn Target,
    module: &str,
    topic: &str,
    name: &str,
    case: fn(&dyn Target) -> Outcome,
) {
    let suite = module.split_once("::").map_or(module, |(_, rest)| rest);
    peer::set_peer_test(&format!("{suite}::__dat_peer"));
    let outcome = match target.available() {
        Ok(()) => case(target),
        Err(reason) => Outcome::Skip(format!("target {} unavailable: {reason}", target.name())),
    };
    if let Outcome::Skip(reason) = outcome {
        tracing::warn!(target = target.name(), topic, case = name, %reason, "case skipped");
        report_skip(target.name(), topic, name, &reason);
    }
}

/// The skip line a test run shows (libtest captures it unless `--nocapture`).
#[allow(clippy::print_stderr)]
fn report_skip(target: &str, topic: &str, name: &str, reason: &str) {
    // Reporting skips is this function's purpose: cargo test has no other channel for them.
    eprintln!("SKIPPED [{target}] {topic}::{name}: {reason}");
}

/// Expands to a module `$suite` with one `#[test]` per conformance case, run against
/// `$target` (an expression producing a [`Target`], evaluated once), plus the hidden
/// `__dat_peer` test that serves peer processes of multi-process cases.
#[macro_export]
macro_rules! conformance_suite {
    ($suite:ident, $target:expr) => {
        $crate::__conformance_cases!(@suite $suite, $target;
            cm::accept_private_data_both_ways,
            cm::post_at_once_after_established,
            cm::reject_private_data_then_reconnect,
            cm::reject_empty_private_data,
            cm::private_data_limits,
            cm::connect_to_nobody,
            cm::connect_unreachable,
            cm::connect_timeout,
            cm::connect_argument_codes,
            cm::connect_not_ready,
            cm::cr_answered_once,
            cm::accept_wrong_ep_form,
            cm::psp_free_keeps_delivered_requests,
            cm::psp_many_requests,
            cm::rsp_single_request,
            cm::rsp_reject_returns_unconnected,
            cm::psp_provider_reject_destroys_ep,
            cm::psp_provider_accept,
            cm::cr_handoff,
            cm::psp_any_connectable,
            cm::psp_large_qualifier,
            cm::passive_side_disconnects,
            cm::reconnect_after_reset,
            cm::dup_connect,
            cm::loopback_same_ia,
            cm::established_precede_later_disconnects,
            dto::send_recv_basic,
            dto::lmr_freed_with_posts_in_flight,
            dto::send_gather,
            dto::recv_scatter,
            dto::send_zero_length,
            dto::many_outstanding_ordered,
            dto::recvs_consumed_fifo,
            dto::send_before_recv_waits,
            dto::bidirectional,
            dto::cookies_verbatim,
            dto::send_longer_than_recv,
            dto::suppress_flag,
            dto::status_counts_outstanding,
            dto::completion_flag_codes,
            dto::too_many_segments,
            dto::disconnect_flushes_recvs,
            dto::preposted_recv_used,
            dto::srq_shared_receives,
            dto::srq_ep_disconnect_async_event,
            srq::srq_low_watermark_once_per_setting,
            srq::srq_low_watermark_set_below_fires_at_once,
            evd::dequeue_empty_exact,
            evd::wait_timeout_expired,
            evd::software_events_fifo,
            evd::post_se_codes,
            evd::wait_threshold,
            evd::wait_threshold_codes,
            evd::wait_woken_by_other_thread,
            evd::idle_wait_sleeps,
            evd::wait_ping_pong_loses_no_wakeup,
            evd::wait_nmore_counts_the_queue,
            evd::unwaitable,
            evd::resize,
            evd::overflow_async_event,
            evd::cno_triggered,
            evd::cno_disabled_evd,
            evd::cno_detached,
            evd::cno_triggered_by_completion,
            evd::cno_triggered_while_other_evd_waits,
            evd::cno_woken_soon_after_a_poller_stops,
            evd::freed_evd_handle,
            evd::cno_single_waiter,
            evd::cno_freed_while_waiting,
            evd::wait_released_by_ia_close,
            ia::ia_open_query_attributes,
            ia::ia_pair_addresses_distinct,
            ia::ia_unknown_name_provider_not_found,
            ia::ia_close_twice_invalid_handle,
            ia::ia_close_graceful_with_children,
            ia::ia_close_abrupt_frees_children,
            ia::ia_close_abrupt_disconnects_peer,
            ia::ia_async_evd,
            objects::pz_create_free,
            objects::pz_free_in_use_by_lmr,
            objects::pz_free_in_use_by_ep,
            objects::lmr_query,
            objects::lmr_local_only_no_rmr_context,
            objects::lmr_double_free,
            objects::lmr_write_read_bounds,
            objects::lmr_register_on_freed_pz,
            objects::lmr_register_user_buffer,
            objects::rmr_create_bind_free,
            objects::ep_modify,
            objects::ep_modify_moves_completions,
            objects::evd_create_codes,
            objects::evd_query_free,
            objects::evd_free_in_use_by_ep,
            objects::evd_free_in_use_by_psp,
            objects::cno_create_free_in_use,
            objects::cno_freed_handle,
            objects::srq_create_query_free,
            objects::srq_in_use_by_ep,
            objects::srq_codes,
            objects::ep_create_query,
            objects::ep_create_bad_handles,
            objects::ep_double_free,
            objects::psp_create_query_in_use,
            objects::psp_needs_cr_evd,
            objects::psp_create_any,
            objects::rsp_query_free,
            objects::psp_provider_flag_advertised,
            protection::local_wrong_lmr_context,
            protection::local_other_pz,
            protection::local_out_of_bounds,
            protection::local_missing_privilege,
            protection::local_freed_lmr,
            protection::local_freed_lmr_after_use,
            protection::remote_bad_rmr_context,
            protection::remote_write_out_of_bounds,
            protection::remote_read_out_of_bounds,
            protection::remote_write_without_privilege,
            protection::remote_read_without_privilege,
            protection::remote_other_pz,
            protection::remote_freed_lmr,
            protection::remote_local_only_lmr,
            protection::remote_fault_breaks_connection,
            rdma::rdma_write_basic,
            rdma::rdma_read_basic,
            rdma::rdma_write_gather,
            rdma::rdma_read_scatter,
            rdma::rdma_write_64mib,
            rdma::rdma_read_64mib,
            rdma::rdma_unaligned,
            rdma::rdma_write_zero_length,
            rdma::rdma_length_error,
            rdma::rdma_write_then_send_ordering,
            rdma::rdma_many_outstanding,
            zero_based::zero_based_lmr,
            zero_based::zero_based_rmr_window,
            seeds::seed_connect_success_is_acp,
            seeds::seed_connect_established,
            seeds::seed_connect_private_data_in_request,
            seeds::seed_connect_peer_rejected,
            seeds::seed_connect_non_peer_rejected,
            seeds::seed_connect_timed_out,
            seeds::seed_connect_qos_model_not_supported,
            seeds::seed_connect_not_unconnected,
            seeds::seed_connect_timeout_positive,
            seeds::seed_dup_connect_same_remote_end,
            seeds::seed_dup_connect_established,
            seeds::seed_dup_connect_peer_rejected,
            seeds::seed_dup_connect_timed_out,
            seeds::seed_dup_connect_sync_codes,
            seeds::seed_dup_connect_invalid_handles,
            seeds::seed_disconnect_event_and_state,
            seeds::seed_disconnect_disconnected_noop,
            seeds::seed_disconnect_disallowed_states,
            seeds::seed_disconnect_acp_flushes_recvs,
            seeds::seed_disconnect_cp_flushes_recvs,
            seeds::seed_disconnect_abrupt_flushes_outstanding,
            seeds::seed_disconnect_graceful_completes_first,
            seeds::seed_disconnect_pending_no_new_posts,
            seeds::seed_ep_create_unconnected,
            seeds::seed_ep_create_default_attributes,
            seeds::seed_ep_create_invalid_combination,
            seeds::seed_ep_create_completion_routing,
            seeds::seed_ep_create_pz_match,
            stress::stress_multi_ep_checksummed,
            stress::stress_shared_evds,
            stress::stress_send_sequence,
            teardown::peer_killed_mid_transfer,
            teardown::peer_process_exits,
            teardown::disconnect_storm_many_to_one,
            teardown::disconnect_storm_passive_side,
            teardown::free_connected_releases,
            teardown::free_with_outstanding_requests,
            teardown::orderly_teardown,
            teardown::close_both_abruptly,
            teardown::free_pending_connect_then_accept,
            teardown::close_ia_with_pending_connect,
            ep_states::u_connect,
            ep_states::u_disconnect_graceful,
            ep_states::u_disconnect_abrupt,
            ep_states::u_reset,
            ep_states::u_free,
            ep_states::u_post_send,
            ep_states::u_post_rdma_write,
            ep_states::u_post_recv,
            ep_states::u_accept_with_ep,
            ep_states::u_rsp_create,
            ep_states::u_dup_source,
            ep_states::r_connect,
            ep_states::r_disconnect_graceful,
            ep_states::r_disconnect_abrupt,
            ep_states::r_reset,
            ep_states::r_free,
            ep_states::r_post_send,
            ep_states::r_post_rdma_write,
            ep_states::r_post_recv,
            ep_states::r_accept_with_ep,
            ep_states::r_rsp_create,
            ep_states::r_dup_source,
            ep_states::pcp_connect,
            ep_states::pcp_disconnect_graceful,
            ep_states::pcp_disconnect_abrupt,
            ep_states::pcp_reset,
            ep_states::pcp_free,
            ep_states::pcp_post_send,
            ep_states::pcp_post_rdma_write,
            ep_states::pcp_post_recv,
            ep_states::pcp_accept_with_ep,
            ep_states::pcp_rsp_create,
            ep_states::pcp_dup_source,
            ep_states::tcp_connect,
            ep_states::tcp_disconnect_graceful,
            ep_states::tcp_disconnect_abrupt,
            ep_states::tcp_reset,
            ep_states::tcp_free,
            ep_states::tcp_post_send,
            ep_states::tcp_post_rdma_write,
            ep_states::tcp_post_recv,
            ep_states::tcp_accept_with_ep,
            ep_states::tcp_rsp_create,
            ep_states::tcp_dup_source,
            ep_states::acp_connect,
            ep_states::acp_disconnect_graceful,
            ep_states::acp_disconnect_abrupt,
            ep_states::acp_reset,
            ep_states::acp_free,
            ep_states::acp_post_send,
            ep_states::acp_post_rdma_write,
            ep_states::acp_post_recv,
            ep_states::acp_accept_with_ep,
            ep_states::acp_rsp_create,
            ep_states::acp_dup_source,
            ep_states::cp_connect,
            ep_states::cp_disconnect_graceful,
            ep_states::cp_disconnect_abrupt,
            ep_states::cp_reset,
            ep_states::cp_free,
            ep_states::cp_post_send,
            ep_states::cp_post_rdma_write,
            ep_states::cp_post_recv,
            ep_states::cp_accept_with_ep,
            ep_states::cp_rsp_create,
            ep_states::cp_dup_source,
            ep_states::c_connect,
            ep_states::c_disconnect_graceful,
            ep_states::c_disconnect_abrupt,
            ep_states::c_reset,
            ep_states::c_free,
            ep_states::c_post_send,
            ep_states::c_post_rdma_write,
            ep_states::c_post_recv,
            ep_states::c_accept_with_ep,
            ep_states::c_rsp_create,
            ep_states::c_dup_source,
            ep_states::dp_connect,
            ep_states::dp_disconnect_graceful,
            ep_states::dp_disconnect_abrupt,
            ep_states::dp_reset,
            ep_states::dp_free,
            ep_states::dp_post_send,
            ep_states::dp_post_rdma_write,
            ep_states::dp_post_recv,
            ep_states::dp_accept_with_ep,
            ep_states::dp_rsp_create,
            ep_states::dp_dup_source,
            ep_states::d_connect,
            ep_states::d_disconnect_graceful,
            ep_states::d_disconnect_abrupt,
            ep_states::d_reset,
            ep_states::d_free,
            ep_states::d_post_send,
            ep_states::d_post_rdma_write,
            ep_states::d_post_recv,
            ep_states::d_accept_with_ep,
            ep_states::d_rsp_create,
            ep_states::d_dup_source
        );
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __conformance_cases {
    (@suite $suite:ident, $target:expr; $($topic:ident :: $case:ident),* $(,)?) => {
        mod $suite {
            #[allow(unused_imports)]
            use super::*;

            fn target() -> &'static dyn $crate::Target {
                static TARGET: ::std::sync::OnceLock<::std::boxed::Box<dyn $crate::Target>> =
                    ::std::sync::OnceLock::new();
                TARGET.get_or_init(|| ::std::boxed::Box::new($target)).as_ref()
            }

            #[test]
            fn __dat_peer() {
                $crate::peer::serve_if_requested(target());
            }

            $(
                #[test]
                fn $case() {
                    $crate::run_case(
                        target(),
                        module_path!(),
                        stringify!($topic),
                        stringify!($case),
                        $crate::cases::$topic::$case,
                    );
                }
            )*
        }
    };
}
