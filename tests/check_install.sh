#!/usr/bin/env bash
# check_install.sh BUILD_DIR [SANITIZER] - `cmake --install` into a temporary prefix lays out
# what HPC users expect, and an MX program builds from it with pkg-config and runs against it
# (built with the same sanitizer as the library, which needs its runtime first).
set -u
build=$1
case "${2:-}" in
	address) san=(-fsanitize=address,undefined) ;;
	thread) san=(-fsanitize=thread) ;;
	*) san=() ;;
esac
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok   - $*"; }
ko() { fail=$((fail + 1)); echo "FAIL - $*"; }
prefix=$(mktemp -d /tmp/omx-install.XXXXXX)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null || ko "cmake --install"
for f in include/myriexpress.h include/mx_extensions.h include/mx_raw.h include/mx_io.h include/open-mx.h \
	include/mx_internals/mx__fops.h include/mx_internals/mx__driver_interface.h \
	lib/libopen-mx.so.0.0.0 lib/libopen-mx.so.0 lib/libopen-mx.so lib/libmyriexpress.so lib/libopen-mx.a \
	lib/libmyriexpress.a lib/pkgconfig/open-mx.pc lib/pkgconfig/myriexpress.pc bin/omx_info bin/omx_perf \
	share/man/man1/omx_perf.1 share/man/man1/omx_info.1; do
	if [ -e "$prefix/$f" ]; then ok "installed $f"; else ko "missing $f"; fi
done
cat >"$prefix/app.c" <<'C'
#include <myriexpress.h>
#include <stdio.h>
#include <string.h>
int main(void)
{
	mx_set_error_handler(MX_ERRORS_RETURN);
	printf("%s\n", mx_strerror(MX_BAD_MATCH_MASK));
	return strcmp(mx_strerror(MX_BAD_MATCH_MASK), "Bad match mask.") != 0;
}
C
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs myriexpress)
if cc "${san[@]}" "$prefix/app.c" $flags -o "$prefix/app" && LD_LIBRARY_PATH="$prefix/lib" "$prefix/app" >/dev/null; then
	ok "MX program built with pkg-config myriexpress runs against the installed library"
else
	ko "MX program via pkg-config"
fi
readelf -d "$prefix/app" | grep -q 'NEEDED.*libopen-mx.so.0' && ok "it needs libopen-mx.so.0" || ko "DT_NEEDED"
echo "$pass passed, $fail failed"
[ "$fail" = 0 ]
