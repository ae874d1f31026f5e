package sqlstore

import "golang.org/x/sys/unix"

// statfsType returns the file system type (magic number) of dir; tests
// replace it.
var statfsType = func(dir string) (uint32, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return uint32(st.Type), nil
}

// networkFS reports whether dir is on a network file system, and which.
func networkFS(dir string) (string, bool) {
	typ, err := statfsType(dir)
	if err != nil {
		return "", false
	}
	switch typ {
	case 0x6969:
		return "NFS", true
	case 0x517B, 0xFF534D42, 0xFE534D42:
		return "SMB/CIFS", true
	case 0x00C36400:
		return "CephFS", true
	case 0x01021997:
		return "9P", true
	case 0x5346414F, 0x6B414653:
		return "AFS", true
	case 0x73757245:
		return "Coda", true
	case 0x47504653:
		return "GPFS", true
	case 0x0BD00BD0:
		return "Lustre", true
	}
	return "", false
}
