/* The floor a /proc fd walk cannot beat: one readdir of /proc, then for every process one
 * readdir of its fd directory and one readlinkat per fd. Prints the number of fds seen. */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : "/proc";
    DIR *proc = opendir(root);
    if (!proc) return 1;
    long fds = 0;
    char path[512], link[4096];
    for (struct dirent *p; (p = readdir(proc));) {
        if (!isdigit((unsigned char)p->d_name[0])) continue;
        snprintf(path, sizeof path, "%s/fd", p->d_name);
        int dfd = openat(dirfd(proc), path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) continue;
        DIR *fd = fdopendir(dfd);
        if (!fd) { close(dfd); continue; }
        for (struct dirent *e; (e = readdir(fd));) {
            if (e->d_name[0] == '.') continue;
            if (readlinkat(dfd, e->d_name, link, sizeof link) > 0) fds++;
        }
        closedir(fd);
    }
    closedir(proc);
    printf("%ld\n", fds);
    return 0;
}
