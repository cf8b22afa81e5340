"""test_ddp.py with each island on a host of its own: nvidia:2 on one
emulated host, amd:2 on another (tests/mp/hosts.py: network namespaces
joined by veth pairs), so the gpubridge process group's bridge and the gloo
group it is compared with cross a network picked by interface (gb0), and
the rendezvous runs on rank 0's host address. The same checks as test_ddp:
parameters bit-identical on every rank, equal within tolerance to gloo DDP
and to a one-process reference."""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "mp"))
import gbtest  # noqa: E402
import test_ddp  # noqa: E402

if __name__ == "__main__":
    if gbtest.is_worker():
        gbtest.setup_path()
        test_ddp.worker()
    else:
        import hosts  # noqa: E402

        why = hosts.unavailable()
        if why:
            gbtest.fail("the emulated hosts cannot be built here: %s" % why)
        rig = hosts.Rig(2).up()
        try:
            test_ddp.main(os.path.abspath(__file__), prefix=[rig.place([0, 0, 1, 1])],
                          extra_env={"GPUBRIDGE_SOCKET_IFNAME": hosts.IFNAME, "GLOO_SOCKET_IFNAME": hosts.IFNAME})
        finally:
            rig.down()
        if rig.left():
            gbtest.fail("the rig's namespaces are left: %s" % rig.left())
