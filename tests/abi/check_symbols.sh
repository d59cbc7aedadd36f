#!/bin/sh
# check_symbols.sh LIB APP - ELF-level ABI checks (spec/mx-api.md 1.2-1.4,
# spec/omx-native-api.md 1.2) with readelf:
#  LIB (the built libopen-mx.so.0.0.0):
#   - SONAME libopen-mx.so.0;
#   - version definitions MX_0.0 (WEAK, no symbol), MX_0.9, MX_0.91 (parent MX_0.9),
#     MX_0.92 (parent MX_0.91);
#   - exactly the seven functions of mx-api.md 1.3 bound to them, as default (@@) versions;
#   - every other exported MX function and every omx_* symbol unversioned;
#   - MX_ERRORS_ARE_FATAL / MX_ERRORS_RETURN / OMX_ERRORS_* are 8-byte OBJECT symbols;
#   - every MX function of mx-api.md 1.4 and the 44 native functions are exported.
#  APP (mx_abi_link, linked with -lmyriexpress):
#   - DT_NEEDED libopen-mx.so.0;
#   - requires MX_0.9, MX_0.91 and MX_0.92 from libopen-mx.so.0 and references the seven
#     versioned functions with those versions, the others unversioned.
set -u
LIB=$1
APP=$2
READELF=${READELF:-readelf}
[ -n "$READELF" ] || READELF=readelf
fail=0
err() { echo "FAIL: $*"; fail=1; }

for f in "$LIB" "$APP"; do
	[ -r "$f" ] || { echo "FAIL: cannot read $f"; exit 1; }
done
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---------------------------------------------------------------- library
"$READELF" -d -W "$LIB" > "$tmp/dyn" || exit 1
"$READELF" -V -W "$LIB" > "$tmp/ver" || exit 1
"$READELF" --dyn-syms -W "$LIB" > "$tmp/syms" || exit 1

grep -q 'Library soname: \[libopen-mx\.so\.0\]' "$tmp/dyn" || err "SONAME is not libopen-mx.so.0"

# Version definitions: "Flags: X  Index: N  Cnt: C  Name: V", parents on the next line.
sed -n '/\.gnu\.version_d/,/\.gnu\.version_r/p' "$tmp/ver" > "$tmp/verdef"
verdef_flags() { sed -n "s/.*Flags: \([A-Za-z ]*[A-Za-z]\) *Index: [0-9]*  *Cnt: [0-9]*  *Name: $1\$/\1/p" "$tmp/verdef"; }
verdef_parent() {
	awk -v v="$1" '
		/Name: / { cur = $NF; next }
		/Parent 1: / { if (cur == v) print $NF }' "$tmp/verdef"
}
[ "$(verdef_flags 'MX_0\.0')" = WEAK ] || err "MX_0.0 missing or not WEAK"
for v in 'MX_0\.9' 'MX_0\.91' 'MX_0\.92'; do
	[ "$(verdef_flags "$v")" = none ] || err "version $v missing or flagged"
done
[ -z "$(verdef_parent MX_0.9)" ] || err "MX_0.9 must have no parent"
[ "$(verdef_parent MX_0.91)" = MX_0.9 ] || err "MX_0.91 parent must be MX_0.9"
[ "$(verdef_parent MX_0.92)" = MX_0.91 ] || err "MX_0.92 parent must be MX_0.91"
ndefs=$(grep -c 'Name: ' "$tmp/verdef")
[ "$ndefs" -eq 5 ] || err "expected 5 version definitions (base + 4 MX nodes), found $ndefs"

# Defined dynamic symbols: "type bind size name[@@ver]" (ABS version-node symbols dropped).
awk '$1 ~ /^[0-9]+:$/ && $7 != "UND" && $7 != "ABS" { print $4, $5, $3, $8 }' "$tmp/syms" > "$tmp/def"

versioned_expected='mx__init_api@@MX_0.92
mx_decompose_endpoint_addr@@MX_0.9
mx_get_info@@MX_0.91
mx_iprobe@@MX_0.91
mx_open_endpoint@@MX_0.9
mx_test@@MX_0.91
mx_wait@@MX_0.91'
versioned_found=$(awk '$4 ~ /@/ { print $4 }' "$tmp/def" | LC_ALL=C sort)
if [ "$versioned_found" != "$versioned_expected" ]; then
	err "versioned symbols differ from mx-api.md 1.3"
	echo "  expected:" $versioned_expected
	echo "  found:   " $versioned_found
fi
awk '$4 ~ /@/ && $4 !~ /@@/ { print $4 }' "$tmp/def" | while read -r s; do
	echo "FAIL: $s is a non-default (@) version"
done | grep . && fail=1
awk '$4 ~ /^omx_.*@/ { print $4 }' "$tmp/def" | grep . && err "omx_* symbols must be unversioned"

has_sym() { awk -v t="$1" -v n="$2" '$1 == t && ($4 == n || index($4, n "@@") == 1) { f = 1 } END { exit !f }' "$tmp/def"; }

mx_functions='mx__init_api mx_finalize mx_set_error_handler mx_open_endpoint mx_close_endpoint
mx_wakeup mx_disable_progression mx_reenable_progression mx_isend mx_issend mx_irecv mx_cancel
mx_test mx_wait mx_test_any mx_wait_any mx_ipeek mx_peek mx_iprobe mx_probe mx_ibuffered
mx_context mx_get_info mx_hostname_to_nic_id mx_board_number_to_nic_id mx_nic_id_to_board_number
mx_nic_id_to_hostname mx_connect mx_decompose_endpoint_addr mx_get_endpoint_addr mx_strerror
mx_strstatus mx_register_unexp_callback mx_iput mx_iget mx_buffered mx_iconnect mx_disconnect
mx_register_unexp_handler mx_forget mx_progress mx_set_endpoint_addr_context
mx_get_endpoint_addr_context mx_set_request_timeout mx_decompose_endpoint_addr2 mx_open_board
mx__get_mapper_state mx__regcache_clean
mx_raw_handle mx_raw_open_endpoint mx_raw_close_endpoint mx_raw_send mx_raw_next_event
mx_raw_set_route_begin mx_raw_set_route_end mx_raw_set_route_mag mx_raw_set_route
mx_raw_clear_routes mx_raw_remove_peer mx_raw_set_map_version mx_raw_num_ports mx_raw_line_speed
mx_raw_set_hostname mx_raw_set_peer_name mx_raw_set_nic_reply_info'
omx_functions='omx__init_api omx_finalize omx_strerror omx_board_number_to_nic_id
omx_nic_id_to_board_number omx_set_error_handler omx_open_endpoint omx_close_endpoint omx_wakeup
omx_get_endpoint_addr omx_connect omx_iconnect omx_disconnect omx_decompose_endpoint_addr
omx_decompose_endpoint_addr_with_session omx_set_endpoint_addr_context
omx_get_endpoint_addr_context omx_isend omx_issend omx_irecv omx_isendv omx_issendv omx_irecvv
omx_context omx_test omx_wait omx_test_any omx_wait_any omx_ipeek omx_peek omx_iprobe omx_probe
omx_ibuffered omx_register_unexp_handler omx_cancel omx_cancel_notest omx_forget
omx_disable_progression omx_reenable_progression omx_get_info omx_hostname_to_nic_id
omx_nic_id_to_hostname omx_progress omx_set_request_timeout'

n=0
for f in $mx_functions; do
	n=$((n + 1))
	has_sym FUNC "$f" || err "MX function $f not exported"
done
[ "$n" -eq 65 ] || err "internal: expected 65 MX functions in the list, have $n"
n=0
for f in $omx_functions; do
	n=$((n + 1))
	has_sym FUNC "$f" || err "native function $f not exported"
done
[ "$n" -eq 44 ] || err "internal: expected 44 native functions in the list, have $n"
has_sym FUNC omx_init && err "omx_init must not be a symbol (static inline)"

for o in MX_ERRORS_ARE_FATAL MX_ERRORS_RETURN OMX_ERRORS_ARE_FATAL OMX_ERRORS_RETURN; do
	line=$(awk -v n="$o" '$4 == n' "$tmp/def")
	[ "$line" = "OBJECT GLOBAL 8 $o" ] || err "$o must be an unversioned 8-byte GLOBAL OBJECT (got '$line')"
done

# Exported mx_* names (single underscore) must all be interface functions (informative
# for others: the spec recommends exporting nothing else, see omx-native-api.md 1.2).
awk '$4 ~ /^mx_/ { sub(/@.*/, "", $4); print $4 }' "$tmp/def" | while read -r s; do
	case " $(echo $mx_functions) " in
	*" $s "*) ;;
	*) echo "FAIL: unexpected exported MX symbol $s" ;;
	esac
done | grep . && fail=1
extra=$(awk '{ sub(/@.*/, "", $4); print $4 }' "$tmp/def" | while read -r s; do
	case " $(echo $mx_functions $omx_functions) MX_ERRORS_ARE_FATAL MX_ERRORS_RETURN OMX_ERRORS_ARE_FATAL OMX_ERRORS_RETURN _init _fini " in
	*" $s "*) ;;
	*) echo "$s" ;;
	esac
done | wc -l)
echo "note: $extra exported symbol(s) outside the MX/native interface (internal, not interface)"

# ---------------------------------------------------------------- application
"$READELF" -d -W "$APP" > "$tmp/appdyn" || exit 1
"$READELF" -V -W "$APP" > "$tmp/appver" || exit 1
"$READELF" --dyn-syms -W "$APP" > "$tmp/appsyms" || exit 1

grep -q 'Shared library: \[libopen-mx\.so\.0\]' "$tmp/appdyn" || err "$APP: no DT_NEEDED libopen-mx.so.0"
grep -q 'Shared library: \[libmyriexpress' "$tmp/appdyn" && err "$APP: must not record libmyriexpress.so"

awk '/File: / { file = $0; sub(/.*File: /, "", file); sub(/ .*/, "", file); next }
     /Name: / && file == "libopen-mx.so.0" { for (i = 1; i <= NF; i++) if ($i == "Name:") print $(i + 1) }' \
	"$tmp/appver" | LC_ALL=C sort > "$tmp/appneeds"
needs=$(tr '\n' ' ' < "$tmp/appneeds")
[ "$needs" = "MX_0.9 MX_0.91 MX_0.92 " ] || err "$APP: version needs on libopen-mx.so.0 are '$needs', expected 'MX_0.9 MX_0.91 MX_0.92'"

app_ref() { awk -v n="$1" '$7 == "UND" { s = $8; sub(/ \(.*/, "", s); if (s == n) print s }' "$tmp/appsyms"; }
for s in mx_open_endpoint@MX_0.9 mx_decompose_endpoint_addr@MX_0.9 mx_get_info@MX_0.91 \
	 mx_test@MX_0.91 mx_wait@MX_0.91 mx_iprobe@MX_0.91 mx__init_api@MX_0.92 \
	 mx_strerror mx_set_error_handler mx_finalize; do
	[ -n "$(app_ref "$s")" ] || err "$APP: no reference to $s"
done
# MX_ERRORS_RETURN is data: a copy relocation (or GOT reference) to an unversioned object.
grep -q 'MX_ERRORS_RETURN@' "$tmp/appsyms" && err "$APP: MX_ERRORS_RETURN must be unversioned"

if [ "$fail" -eq 0 ]; then
	echo "abi.symbols: ok"
fi
exit "$fail"
