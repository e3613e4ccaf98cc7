/* Load for the DRM scan benchmark: forks N children that each hold F open fds of /dev/null
 * and sleep until the parent is terminated (SIGTERM kills the process group).
 * Usage: holder N F   (prints "ready" on stdout once every child holds its fds) */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000, f = argc > 2 ? atoi(argv[2]) : 64;
    int ready[2];
    if (pipe(ready) != 0) return 1;
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 1; }
        if (pid == 0) {
            for (int k = 0; k < f; k++) if (open("/dev/null", O_RDONLY) < 0) _exit(1);
            if (write(ready[1], "x", 1) != 1) _exit(1);
            for (;;) pause();
        }
    }
    char c;
    for (int i = 0; i < n; i++) if (read(ready[0], &c, 1) != 1) return 1;
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
}
