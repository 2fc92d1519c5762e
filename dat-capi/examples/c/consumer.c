/* A minimal uDAPL consumer using our providers through dat.conf and the stock libdat2:
 *
 *   DAT_OVERRIDE=/path/dat.conf ./consumer rs-tcp
 *
 * with a dat.conf line
 *   rs-tcp u2.0 nonthreadsafe default /abs/path/libdat_capi.so dat.2.0 "tcp-lo" ""
 *
 * It opens the IA, prints its address and limits, registers a buffer, creates an EVD and an
 * endpoint, posts a receive, checks that the EVD is empty (DAT_QUEUE_EMPTY), and tears
 * everything down. Exit status 0 on success, 1 on the first failing call (printed). */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <dat2/udat.h>

#define CHECK(call)                                                            \
    do {                                                                       \
        DAT_RETURN rc_ = (call);                                               \
        if (rc_ != DAT_SUCCESS) {                                              \
            const char *maj = "", *min = "";                                   \
            dat_strerror(rc_, &maj, &min);                                     \
            printf("%s failed: %#x %s %s\n", #call, (unsigned)rc_, maj, min); \
            return 1;                                                          \
        }                                                                      \
    } while (0)

int main(int argc, char **argv)
{
    char *name = argc > 1 ? argv[1] : "rs-tcp";
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL, evd = DAT_HANDLE_NULL;
    DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
    DAT_LMR_HANDLE lmr = DAT_HANDLE_NULL;
    DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
    DAT_IA_ATTR ia_attr;
    DAT_PROVIDER_ATTR pr_attr;
    DAT_REGION_DESCRIPTION region;
    DAT_LMR_CONTEXT lmr_ctx;
    DAT_RMR_CONTEXT rmr_ctx;
    DAT_VLEN reg_len;
    DAT_VADDR reg_addr;
    DAT_LMR_TRIPLET iov;
    DAT_DTO_COOKIE cookie;
    DAT_EVENT event;
    DAT_RETURN rc;
    static char buf[4096];

    CHECK(dat_ia_open(name, 8, &async_evd, &ia));
    CHECK(dat_ia_query(ia, NULL, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL, &pr_attr));
    if (ia_attr.ia_address_ptr && ia_attr.ia_address_ptr->sa_family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ia_attr.ia_address_ptr;
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &sin->sin_addr, ip, sizeof ip);
        printf("IA %s: address %s, provider %s, max_eps %d, max_private_data %d\n", name, ip,
               pr_attr.provider_name, ia_attr.max_eps, pr_attr.max_private_data_size);
    }
    CHECK(dat_pz_create(ia, &pz));
    region.for_va = buf;
    CHECK(dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, sizeof buf, pz,
                         DAT_MEM_PRIV_ALL_FLAG, DAT_VA_TYPE_VA, &lmr, &lmr_ctx, &rmr_ctx,
                         &reg_len, &reg_addr));
    CHECK(dat_evd_create(ia, 16, DAT_HANDLE_NULL, DAT_EVD_DTO_FLAG, &evd));
    CHECK(dat_ep_create(ia, pz, evd, evd, DAT_HANDLE_NULL, NULL, &ep));
    iov.virtual_address = (DAT_VADDR)(uintptr_t)buf;
    iov.segment_length = sizeof buf;
    iov.lmr_context = lmr_ctx;
    cookie.as_64 = 42;
    CHECK(dat_ep_post_recv(ep, 1, &iov, cookie, DAT_COMPLETION_DEFAULT_FLAG));
    rc = dat_evd_dequeue(evd, &event);
    if (rc != DAT_QUEUE_EMPTY) {
        printf("dat_evd_dequeue: expected DAT_QUEUE_EMPTY, got %#x\n", (unsigned)rc);
        return 1;
    }
    CHECK(dat_ep_free(ep));
    CHECK(dat_evd_free(evd));
    CHECK(dat_lmr_free(lmr));
    CHECK(dat_pz_free(pz));
    CHECK(dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG));
    printf("consumer: PASSED\n");
    return 0;
}
