package envelope

// SealWith seals plaintext as Seal does, with the data key, salt, hash
// and header given: what the worked example of docs/FORMAT.md is made of.
func SealWith(key, salt, hash, header, ad, plaintext []byte) ([]byte, error) {
	prelude := appendPrelude(nil, salt, hash, header)
	st, err := newState(key, prelude, ad)
	if err != nil {
		return nil, err
	}
	return st.sealAll(prelude, plaintext), nil
}
