/* Opens an IA through the real libdat2 (dat.conf from $DAT_OVERRIDE) and prints the result:
 * "open <hex rc>" and, if the open worked, "close <hex rc>". Used by tests/libdat2.rs. */
#include <stdio.h>
#include <dat2/udat.h>

int main(int argc, char **argv)
{
    DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
    DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
    DAT_RETURN rc;

    if (argc < 2)
        return 2;
    rc = dat_ia_open(argv[1], 8, &evd, &ia);
    printf("open %#x\n", (unsigned)rc);
    if (rc == DAT_SUCCESS) {
        rc = dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
        printf("close %#x\n", (unsigned)rc);
    }
    return 0;
}
