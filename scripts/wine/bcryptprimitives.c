/* A stand-in bcryptprimitives.dll for Wine 8.0, which lacks ProcessPrng: Rust's Windows std
 * imports ProcessPrng from it (HashMap seeds), so without this no Rust .exe starts under Wine.
 * Our own source: ProcessPrng over advapi32's SystemFunction036 (RtlGenRandom), which Wine
 * implements. Placed beside each test .exe by scripts/wine/runner.sh. Test use only. */
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len)
{
    while (len > 0) {
        ULONG chunk = len > 0x10000000 ? 0x10000000 : (ULONG)len;
        if (!SystemFunction036(data, chunk))
            return FALSE;
        data += chunk;
        len -= chunk;
    }
    return TRUE;
}
