// Package keyrange computes the bounds of key ranges for the store
// backends' scans.
package keyrange

// PrefixEnd returns the smallest key that sorts after every key starting
// with prefix, or nil if there is none (prefix is empty or all 0xFF).
func PrefixEnd(prefix []byte) []byte {
	for i := len(prefix) - 1; i >= 0; i-- {
		if prefix[i] != 0xFF {
			end := make([]byte, i+1)
			copy(end, prefix)
			end[i]++
			return end
		}
	}
	return nil
}
