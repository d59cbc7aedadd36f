/*
 * iface.c - interface lookup: index, MAC, MTU and flags through ioctls (they follow the calling
 * thread's network namespace, which sysfs does not necessarily do), NUMA node and driver name
 * from sysfs (best effort).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <net/if.h>
#include <net/if_arp.h>

#include "net/net.h"

static int read_sysfs_int(const char *path, int *out)
{
	char buf[32];
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (r <= 0)
		return -1;
	buf[r] = '\0';
	char *end;
	errno = 0;
	long v = strtol(buf, &end, 10);
	if (errno || end == buf)
		return -1;
	*out = (int)v;
	return 0;
}

static int iface_numa_node(const char *name)
{
	char path[PATH_MAX];
	int node;

	/* The netdev's parent device; virtio and similar buses keep numa_node on their parent. */
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/numa_node", name);
	if (read_sysfs_int(path, &node) == 0)
		return node < 0 ? -1 : node;
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/../numa_node", name);
	if (read_sysfs_int(path, &node) == 0)
		return node < 0 ? -1 : node;
	return -1;
}

static void iface_driver(const char *name, char *out, size_t cap)
{
	char path[PATH_MAX], target[PATH_MAX];

	out[0] = '\0';
	snprintf(path, sizeof(path), "/sys/class/net/%s/device/driver", name);
	ssize_t r = readlink(path, target, sizeof(target) - 1);
	if (r <= 0)
		return;
	target[r] = '\0';
	const char *base = strrchr(target, '/');
	base = base ? base + 1 : target;
	size_t bl = strlen(base);
	if (bl >= cap)
		bl = cap - 1;
	memcpy(out, base, bl);
	out[bl] = '\0';
}

int omx_iface_query(const char *name, struct omx_iface_info *out)
{
	struct ifreq ifr;
	int ret = 0;

	if (!name || !out)
		return -EINVAL;
	size_t len = strlen(name);
	if (len == 0 || len >= IF_NAMESIZE || strchr(name, '/'))
		return -ENODEV;

	memset(out, 0, sizeof(*out));
	memcpy(out->name, name, len + 1);
	out->numa_node = -1;

	/* Interface ioctls work on any socket family; AF_UNIX needs no privilege and no IP stack. */
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;

	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, name, len + 1);
	if (ioctl(s, SIOCGIFINDEX, &ifr) < 0) {
		ret = errno == ENODEV || errno == ENXIO ? -ENODEV : -errno;
		goto out;
	}
	out->ifindex = ifr.ifr_ifindex;

	if (ioctl(s, SIOCGIFHWADDR, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	memcpy(out->mac, ifr.ifr_hwaddr.sa_data, 6);

	if (ioctl(s, SIOCGIFMTU, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	out->mtu = (uint32_t)ifr.ifr_mtu;

	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		ret = -errno;
		goto out;
	}
	out->up = (ifr.ifr_flags & IFF_UP) && (ifr.ifr_flags & IFF_RUNNING);
	out->loopback = !!(ifr.ifr_flags & IFF_LOOPBACK);

	out->numa_node = iface_numa_node(name);
	iface_driver(name, out->driver, sizeof(out->driver));
out:
	close(s);
	return ret;
}
