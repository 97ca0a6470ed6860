// kernels/amx.h: the tile state's permission.
#include "core/kernels/amx.h"

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace ember::kernels::amx {

bool granted() {
#if defined(__linux__) && defined(__x86_64__)
  static const bool ok = syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */) == 0;
  return ok;
#else
  return false;
#endif
}

}  // namespace ember::kernels::amx
