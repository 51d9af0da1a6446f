//! The keys msprobe's files and item dicts use, with fixed ids ([`k`]), and Python's truthiness of
//! a dump value: what the dump model, the overflow check and the items share.

use crate::formats::json::{KeyId, Store, Val};

/// Keys with fixed ids: [`intern_known_keys`] interns them first, in this order.
pub mod k {
    use crate::formats::json::KeyId;
    pub const TYPE: KeyId = KeyId(0);
    pub const DTYPE: KeyId = KeyId(1);
    pub const SHAPE: KeyId = KeyId(2);
    pub const MAX: KeyId = KeyId(3);
    pub const MIN: KeyId = KeyId(4);
    pub const MEAN: KeyId = KeyId(5);
    pub const NORM: KeyId = KeyId(6);
    pub const REQUIRES_GRAD: KeyId = KeyId(7);
    pub const MD5: KeyId = KeyId(8);
    pub const DATA_NAME: KeyId = KeyId(9);
    pub const FULL_OP_NAME: KeyId = KeyId(10);
    pub const STATE: KeyId = KeyId(11);
    pub const VALUE: KeyId = KeyId(12);
    pub const GROUP_RANKS: KeyId = KeyId(13);
    pub const GROUP_ID: KeyId = KeyId(14);
    pub const CLASS_TYPE: KeyId = KeyId(15);
    pub const OP: KeyId = KeyId(16);
    pub const PEER: KeyId = KeyId(17);
    pub const TAG: KeyId = KeyId(18);
    pub const TENSOR: KeyId = KeyId(19);
    pub const MAX_DIFF: KeyId = KeyId(20);
    pub const MIN_DIFF: KeyId = KeyId(21);
    pub const MEAN_DIFF: KeyId = KeyId(22);
    pub const NORM_DIFF: KeyId = KeyId(23);
    pub const MAX_REL: KeyId = KeyId(24);
    pub const MIN_REL: KeyId = KeyId(25);
    pub const MEAN_REL: KeyId = KeyId(26);
    pub const NORM_REL: KeyId = KeyId(27);
    pub const RG_CONSISTENT: KeyId = KeyId(28);
    pub const RESULT: KeyId = KeyId(29);
    pub const ERR_MESSAGE: KeyId = KeyId(30);
    pub const INPUT_ARGS: KeyId = KeyId(31);
    pub const INPUT_KWARGS: KeyId = KeyId(32);
    pub const INPUT: KeyId = KeyId(33);
    pub const OUTPUT: KeyId = KeyId(34);
    pub const PARAMETERS: KeyId = KeyId(35);
    pub const ERROR_KEY: KeyId = KeyId(36);
    pub const COSINE: KeyId = KeyId(37);
    pub const EUC_DIST: KeyId = KeyId(38);
    pub const MAX_ABS_ERR: KeyId = KeyId(39);
    pub const ONE_THOUSANDTH: KeyId = KeyId(40);
    pub const FIVE_THOUSANDTHS: KeyId = KeyId(41);
}

pub(crate) const KNOWN_KEYS: &[&str] = &[
    "type",
    "dtype",
    "shape",
    "Max",
    "Min",
    "Mean",
    "Norm",
    "requires_grad",
    "md5",
    "data_name",
    "full_op_name",
    "state",
    "value",
    "group_ranks",
    "group_id",
    "class_type",
    "op",
    "peer",
    "tag",
    "tensor",
    "Max diff",
    "Min diff",
    "Mean diff",
    "L2norm diff",
    "MaxRelativeErr",
    "MinRelativeErr",
    "MeanRelativeErr",
    "NormRelativeErr",
    "Requires_grad Consistent",
    "Result",
    "Err_message",
    "input_args",
    "input_kwargs",
    "input",
    "output",
    "parameters",
    "error_key",
    "Cosine",
    "EucDist",
    "MaxAbsErr",
    "One Thousandth Err Ratio",
    "Five Thousandths Err Ratio",
];

/// Interns the fixed keys into a fresh store so that the ids in [`k`] hold.
pub fn intern_known_keys(store: &mut Store) {
    for (i, key) in KNOWN_KEYS.iter().enumerate() {
        let id = store.intern_key(key);
        debug_assert_eq!(id, KeyId(i as u32));
    }
}

/// Python truthiness of a dump value.
pub fn truthy(store: &Store, v: Val) -> bool {
    match v {
        Val::Null => false,
        Val::Bool(b) => b,
        Val::Int(i) => i != 0,
        Val::BigInt(_) => true,
        Val::Float(f) => f != 0.0,
        Val::Str(r) => r.len > 0,
        Val::List { len, .. } => len > 0,
        Val::Obj { .. } => store.obj_len(v) > 0,
    }
}
