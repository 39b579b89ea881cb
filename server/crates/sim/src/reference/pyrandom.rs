//! CPython's `random.Random`, bit for bit: MT19937 seeded from an int by `init_by_array`
//! (`Modules/_randommodule.c`) and the `Lib/random.py` (3.11) methods the reference generator
//! calls: `random`, `getrandbits`, `_randbelow` (rejection sampling) behind `randrange`,
//! `randint` and `choice`, and `normalvariate`/`lognormvariate` (Kinderman–Monahan).
//!
//! Owns only the random stream; it must not know about clusters. Anything the generator does not
//! call (`shuffle`, `sample`, `gauss`, seeding from str/bytes, ...) is deliberately not ported.

const N: usize = 624;
const M: usize = 397;
const MATRIX_A: u32 = 0x9908_b0df;
const UPPER_MASK: u32 = 0x8000_0000;
const LOWER_MASK: u32 = 0x7fff_ffff;

/// `random.Random(seed)` for a non-negative int seed below 2**64.
#[derive(Clone)]
pub struct PyRandom {
    mt: [u32; N],
    index: usize,
}

impl PyRandom {
    /// `random.Random(seed)`: the int's 32-bit words, least significant first, go to
    /// `init_by_array` (one zero word for seed 0), as `random_seed` in `_randommodule.c` does.
    pub fn new(seed: u64) -> Self {
        let low = seed as u32;
        let high = (seed >> 32) as u32;
        let mut rng = PyRandom {
            mt: [0; N],
            index: N,
        };
        if high == 0 {
            rng.init_by_array(&[low]);
        } else {
            rng.init_by_array(&[low, high]);
        }
        rng
    }

    fn init_genrand(&mut self, s: u32) {
        self.mt[0] = s;
        for i in 1..N {
            let prev = self.mt[i - 1];
            self.mt[i] = 1_812_433_253u32
                .wrapping_mul(prev ^ (prev >> 30))
                .wrapping_add(i as u32);
        }
        self.index = N;
    }

    fn init_by_array(&mut self, key: &[u32]) {
        self.init_genrand(19_650_218);
        let mt = &mut self.mt;
        let (mut i, mut j) = (1usize, 0usize);
        for _ in 0..N.max(key.len()) {
            let prev = mt[i - 1];
            mt[i] = (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_664_525))
                .wrapping_add(key[j])
                .wrapping_add(j as u32);
            i += 1;
            j += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
            if j >= key.len() {
                j = 0;
            }
        }
        for _ in 0..N - 1 {
            let prev = mt[i - 1];
            mt[i] =
                (mt[i] ^ (prev ^ (prev >> 30)).wrapping_mul(1_566_083_941)).wrapping_sub(i as u32);
            i += 1;
            if i >= N {
                mt[0] = mt[N - 1];
                i = 1;
            }
        }
        mt[0] = 0x8000_0000;
    }

    fn genrand_u32(&mut self) -> u32 {
        if self.index >= N {
            let mag = |y: u32| if y & 1 == 0 { 0 } else { MATRIX_A };
            let mt = &mut self.mt;
            for kk in 0..N - M {
                let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + M] ^ (y >> 1) ^ mag(y);
            }
            for kk in N - M..N - 1 {
                let y = (mt[kk] & UPPER_MASK) | (mt[kk + 1] & LOWER_MASK);
                mt[kk] = mt[kk + M - N] ^ (y >> 1) ^ mag(y);
            }
            let y = (mt[N - 1] & UPPER_MASK) | (mt[0] & LOWER_MASK);
            mt[N - 1] = mt[M - 1] ^ (y >> 1) ^ mag(y);
            self.index = 0;
        }
        let mut y = self.mt[self.index];
        self.index += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^ (y >> 18)
    }

    /// `random()`: a float in [0, 1) with 53 random bits.
    pub fn random(&mut self) -> f64 {
        let a = self.genrand_u32() >> 5;
        let b = self.genrand_u32() >> 6;
        (f64::from(a) * 67_108_864.0 + f64::from(b)) * (1.0 / 9_007_199_254_740_992.0)
    }

    /// `getrandbits(k)` for `k <= 64`: 32-bit words fill the result from the least significant
    /// end; the last (most significant) word keeps only its top `k mod 32` bits.
    pub fn getrandbits(&mut self, k: u32) -> u64 {
        assert!(k <= 64, "getrandbits is ported for k <= 64 only");
        if k == 0 {
            return 0;
        }
        if k <= 32 {
            return u64::from(self.genrand_u32() >> (32 - k));
        }
        let mut result = 0u64;
        let mut left = k;
        let mut shift = 0;
        while left > 0 {
            let mut r = self.genrand_u32();
            if left < 32 {
                r >>= 32 - left;
            }
            result |= u64::from(r) << shift;
            shift += 32;
            left = left.saturating_sub(32);
        }
        result
    }

    /// `_randbelow_with_getrandbits(n)`: draw `n.bit_length()` bits until the value is below `n`.
    fn randbelow(&mut self, n: u64) -> u64 {
        assert!(n > 0, "_randbelow needs a positive bound");
        let k = u64::BITS - n.leading_zeros();
        let mut r = self.getrandbits(k);
        while r >= n {
            r = self.getrandbits(k);
        }
        r
    }

    /// `randrange(stop)`: an int in `[0, stop)`.
    pub fn randrange(&mut self, stop: u64) -> u64 {
        self.randbelow(stop)
    }

    /// `randint(a, b)`: an int in `[a, b]` (`a + _randbelow(b - a + 1)`).
    pub fn randint(&mut self, a: i64, b: i64) -> i64 {
        assert!(a <= b, "empty range for randint({a}, {b})");
        let width = (b - a + 1) as u64;
        a + self.randbelow(width) as i64
    }

    /// `choice(seq)`: `seq[_randbelow(len(seq))]`.
    pub fn choice<'a, T>(&mut self, seq: &'a [T]) -> &'a T {
        &seq[self.randbelow(seq.len() as u64) as usize]
    }

    /// `normalvariate(mu, sigma)`: Kinderman and Monahan's ratio-of-uniforms method, with the
    /// same operation order as `random.py` so the floats round identically.
    pub fn normalvariate(&mut self, mu: f64, sigma: f64) -> f64 {
        let nv_magicconst = 4.0 * (-0.5f64).exp() / 2.0f64.sqrt();
        loop {
            let u1 = self.random();
            let u2 = 1.0 - self.random();
            let z = nv_magicconst * (u1 - 0.5) / u2;
            let zz = z * z / 4.0;
            if zz <= -u2.ln() {
                return mu + z * sigma;
            }
        }
    }

    /// `lognormvariate(mu, sigma)`: `exp(normalvariate(mu, sigma))`.
    pub fn lognormvariate(&mut self, mu: f64, sigma: f64) -> f64 {
        self.normalvariate(mu, sigma).exp()
    }
}

impl std::fmt::Debug for PyRandom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PyRandom")
            .field("index", &self.index)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::PyRandom;

    // Expected values printed by CPython 3.11.7, e.g.
    // `python3 -c "import random; r = random.Random(42); print([repr(r.random()) for _ in range(3)])"`.

    #[test]
    fn random_matches_cpython() {
        let mut r = PyRandom::new(42);
        let got: Vec<f64> = (0..3).map(|_| r.random()).collect();
        assert_eq!(
            got,
            [
                0.6394267984578837,
                0.025010755222666936,
                0.27502931836911926
            ]
        );
        assert_eq!(PyRandom::new(20240501).random(), 0.8966996101719598);
        // A seed wider than 32 bits is split into two key words.
        assert_eq!(PyRandom::new((1 << 40) + 5).random(), 0.5043802970418443);
    }

    #[test]
    fn getrandbits_matches_cpython() {
        let mut r = PyRandom::new(42);
        let got: Vec<u64> = (0..3).map(|_| r.getrandbits(36)).collect();
        assert_eq!(got, [7041284509, 47352060625, 14066143831]);
        assert_eq!(r.getrandbits(32), 958682846);
        assert_eq!(r.getrandbits(5), 4);
    }

    #[test]
    fn randint_randrange_choice_match_cpython() {
        let mut r = PyRandom::new(42);
        let ints: Vec<i64> = (0..5).map(|_| r.randint(0, 30)).collect();
        assert_eq!(ints, [20, 3, 0, 23, 8]);
        let ranges: Vec<u64> = (0..5).map(|_| r.randrange(3)).collect();
        assert_eq!(ranges, [0, 0, 0, 2, 0]);
        let alphabet: Vec<char> = "abcdefghijklmnopqrstuvwxyz0".chars().collect();
        let chosen: String = (0..5).map(|_| *r.choice(&alphabet)).collect();
        assert_eq!(chosen, "vxrcs");
    }

    #[test]
    fn lognormvariate_matches_cpython() {
        let mut r = PyRandom::new(42);
        let got: Vec<f64> = (0..3).map(|_| r.lognormvariate(0.0, 0.9)).collect();
        assert_eq!(
            got,
            [1.2470661436805972, 0.6394415727649075, 3.093512998799263]
        );
        assert_eq!(r.normalvariate(0.0, 1.0), -0.1380590627428119);
    }
}
