package kmstest

// UseOrder names each of ids by the order of its first use, A for the
// first, B for the second and so on, and returns the names in turn: the
// IDs of the keys of five encrypt calls, two on one key and three on the
// next, are "AABBB".
func UseOrder(ids []string) string {
	names := map[string]byte{}
	got := make([]byte, 0, len(ids))
	for _, id := range ids {
		if _, ok := names[id]; !ok {
			names[id] = byte('A' + len(names))
		}
		got = append(got, names[id])
	}
	return string(got)
}
