# lib_ofi.sh - helpers shared by the ofi/ test scripts (source it).
#
#   ofi_sanitizer_env SO   prints "env" arguments that let an uninstrumented program (fi_info,
#                          mpirun, an MPI program built with mpicc) load SO when SO was built with
#                          a sanitizer: LD_PRELOAD of the ASan (or TSan) runtime SO links against
#                          (it must be the first library of the process), and for ASan,
#                          ASAN_OPTIONS without leak detection (the leaks of such a program are
#                          not ours; the instrumented test client still checks the provider's).
#                          Prints nothing for a build without sanitizer.

ofi_sanitizer_env() {
	local so=${1:?shared object} rt opts
	rt=$(ldd "$so" 2>/dev/null | awk '/libasan\.so/ { print $3; exit }')
	if [ -n "$rt" ] && [ -e "$rt" ]; then
		opts=${ASAN_OPTIONS:-}
		opts=${opts//detect_leaks=1/detect_leaks=0}
		case ":$opts:" in *:detect_leaks=*) ;; *) opts="${opts:+$opts:}detect_leaks=0" ;; esac
		echo "LD_PRELOAD=$rt ASAN_OPTIONS=$opts"
		return 0
	fi
	rt=$(ldd "$so" 2>/dev/null | awk '/libtsan\.so/ { print $3; exit }')
	[ -n "$rt" ] && [ -e "$rt" ] && echo "LD_PRELOAD=$rt"
	return 0
}
