// mpich_self_wait: does a wait for a receive miss its completion when
// another thread completes it, by sending the message the rank receives
// from itself? (TestWaitSelfSendConcurrent in request_test.go.)
//
//	mpicc.mpich -O2 -pthread -o mpich_self_wait mpich_self_wait.c
//	timeout 10 mpiexec.hydra -n 1 ./mpich_self_wait wait self
//
// Each of 20 rounds posts MPI_Irecv of a message to the rank itself, waits
// for it on a new thread (HOW: wait, waitall, waitany, test, testall), and
// sends the message with MPI_Send on the main thread. COMM: self
// (MPI_COMM_SELF) or world (the rank's own rank in MPI_COMM_WORLD); peer
// pairs ranks 0 and 1, 2 and 3...: each receives from its partner, which is
// not the case that fails. A wait still running 2 s after the send is
// reported, with whether the message is still unmatched (MPI_Iprobe) and
// whether its data reached the receive buffer; the rank then exits with 3.
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static MPI_Request req;
static const char *how;
static volatile int finished;

static void *waiter(void *arg) {
	(void)arg;
	MPI_Status st;
	int flag = 0, idx;
	if (strcmp(how, "wait") == 0) MPI_Wait(&req, &st);
	else if (strcmp(how, "waitall") == 0) MPI_Waitall(1, &req, &st);
	else if (strcmp(how, "waitany") == 0) MPI_Waitany(1, &req, &idx, &st);
	else if (strcmp(how, "test") == 0) while (!flag) MPI_Test(&req, &flag, &st);
	else if (strcmp(how, "testall") == 0) while (!flag) MPI_Testall(1, &req, &flag, &st);
	else abort();
	finished = 1;
	return NULL;
}

int main(int argc, char **argv) {
	int provided, rank;
	MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	if (provided != MPI_THREAD_MULTIPLE || argc < 3) MPI_Abort(MPI_COMM_WORLD, 1);
	how = argv[1];
	MPI_Comm c = strcmp(argv[2], "self") == 0 ? MPI_COMM_SELF : MPI_COMM_WORLD;
	int from = c == MPI_COMM_SELF ? 0 : strcmp(argv[2], "peer") == 0 ? rank ^ 1 : rank;
	for (int r = 0; r < 20; r++) {
		int buf[4] = {0}, out[3] = {1, 2, 3};
		MPI_Irecv(buf, 4, MPI_INT, from, 300 + r, c, &req);
		pthread_t th;
		finished = 0;
		pthread_create(&th, NULL, waiter, NULL);
		MPI_Send(out, 3, MPI_INT, from, 300 + r, c);
		for (int ms = 0; !finished && ms < 2000; ms++) {
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
		}
		if (!finished) {
			int flag = 0;
			MPI_Iprobe(from, 300 + r, c, &flag, MPI_STATUS_IGNORE);
			fprintf(stderr, "rank %d round %d: %s still waiting 2 s after the send; message %s; data %s the buffer\n",
				rank, r, how, flag ? "unmatched" : "matched", buf[2] == 3 ? "in" : "not in");
			_exit(3);
		}
		pthread_join(th, NULL);
	}
	MPI_Finalize();
	return 0;
}
