#!/bin/sh
# /init of the rig's initramfs (busybox). Mounts the host's root (read-only 9p) and the
# result directory, then runs manetkit.field.guest in a chroot of the host's root so the
# guest uses the host's Python, iw, ip and this manetkit checkout. Powers off at the end.
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
modprobe virtio_pci
modprobe 9pnet_virtio
modprobe 9p
# cache=loose: the host root is read-only for the guest's lifetime, so caching is safe
# and makes Python's many small reads cheap under TCG.
mount -t 9p -o trans=virtio,version=9p2000.L,ro,cache=loose,msize=512000 hostroot /host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=512000 results /results
modprobe mac80211_hwsim radios=3
modprobe tun
H=/host
mount -t proc proc $H/proc
mount -t sysfs sysfs $H/sys
mount -t debugfs debugfs $H/sys/kernel/debug
mount -t devtmpfs devtmpfs $H/dev
# A checkout or a virtualenv under /tmp, /run or /var/tmp (a CI clone, say) would vanish
# under the tmpfs below: the host names them as mk_keep=PATH[,PATH...] on the kernel
# command line and each is bind-mounted back on top.
KEEP=$(sed -n 's/.*mk_keep=\([^ ]*\).*/\1/p' /proc/cmdline | tr ',' ' ')
i=0
for k in $KEEP; do i=$((i+1)); mkdir -p /keep/$i && mount -o bind "$H$k" /keep/$i; done
mount -t tmpfs tmpfs $H/run
mount -t tmpfs tmpfs $H/tmp
mount -t tmpfs tmpfs $H/var/tmp
i=0
for k in $KEEP; do i=$((i+1)); mkdir -p "$H$k" && mount -o bind /keep/$i "$H$k"; done
mkdir -p $H/tmp/results
mount -o bind /results $H/tmp/results
cat /proc/mounts; ls -la $H/proc/self/ns | head -5
echo "[guest] booted, running manetkit.field.guest"
chroot $H /bin/sh /tmp/results/run.sh
echo "[guest] done (exit $?)"
poweroff -f
