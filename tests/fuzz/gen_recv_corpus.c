/* gen_recv_corpus.c - records the receive-path seed corpus: gen_recv_corpus DIR (fuzz_recv.c). */
#include <stdio.h>

int omx_fuzz_recv_record(const char *dir);

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_recv_corpus DIR\n");
		return 2;
	}
	return omx_fuzz_recv_record(argv[1]);
}
