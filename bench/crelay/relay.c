/*
 * relay CMD ARGS...: the benchmark's second floor. It launches CMD and
 * copies bytes between its own stdio and CMD's, one thread per direction,
 * each blocked in read(2) until bytes come: no runtime, no poller, no
 * parsing. What it costs over a direct pipe is what any process standing
 * between the editor and the agent costs on this machine.
 *
 * bench (go run ./bench) builds it with the system's C compiler when there
 * is one, and leaves its row out otherwise.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

struct pump {
	int from, to;
};

static void *copy(void *arg)
{
	struct pump *p = arg;
	static __thread char buf[1 << 16];
	for (;;) {
		ssize_t n = read(p->from, buf, sizeof buf);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (char *b = buf; n > 0;) {
			ssize_t w = write(p->to, b, n);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0)
				return NULL;
			b += w;
			n -= w;
		}
	}
	close(p->to);
	return NULL;
}

int main(int argc, char **argv)
{
	int in[2], out[2];
	if (argc < 2) {
		fprintf(stderr, "usage: relay CMD [ARGS...]\n");
		return 2;
	}
	if (pipe(in) < 0 || pipe(out) < 0) {
		perror("relay: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("relay: fork");
		return 1;
	}
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]), close(in[1]), close(out[0]), close(out[1]);
		execvp(argv[1], argv + 1);
		perror("relay: exec");
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	struct pump up = {0, in[1]}, down = {out[0], 1};
	pthread_t t;
	if (pthread_create(&t, NULL, copy, &up) != 0) {
		fprintf(stderr, "relay: cannot start a thread\n");
		return 1;
	}
	copy(&down); /* until the child closes its stdout */
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
