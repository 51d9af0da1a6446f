//! The `.vis.db` file as msprobe creates it (`visualization/db_utils.py`): its tables and
//! indexes for [`crate::visdb::sqlite_writer`], and the rows of [`crate::visdb::export`] as column values.
//!
//! The column lists are the one source of the `CREATE TABLE` texts (as `sqlite_master` stores
//! them; the fidelity tests compare them with msprobe's files) and of the index columns.

pub mod export;
pub mod sqlite_writer;

use crate::visdb::export::{ConfigRow, NodeRow, StackRow};
use crate::visdb::sqlite_writer::{Index, Table, Value};

/// Table numbers in [`schema`].
pub const TB_NODES: usize = 0;
pub const TB_STACK: usize = 1;
pub const TB_CONFIG: usize = 2;

const NODE_COLUMNS: [(&str, &str); 22] = [
    ("id", "TEXT PRIMARY KEY"),
    ("graph_id", "TEXT NOT NULL"),
    ("node_order", "INTEGER NOT NULL"),
    ("node_name", "TEXT NOT NULL"),
    ("node_type", "TEXT NOT NULL"),
    ("up_node", "TEXT"),
    ("sub_nodes", "TEXT"),
    ("precision_index", "INTEGER"),
    ("overflow_level", "TEXT"),
    ("micro_step_id", "INTEGER NOT NULL"),
    ("matched_node_link", "TEXT"),
    ("stack_id", "TEXT"),
    ("parallel_merge_info", "TEXT"),
    ("matched_distributed", "TEXT"),
    ("modified", "INTEGER NOT NULL"),
    ("input_data", "TEXT"),
    ("output_data", "TEXT"),
    ("data_source", "TEXT"),
    ("dump_data_dir", "TEXT"),
    ("step", "INTEGER NOT NULL"),
    ("rank", "INTEGER NOT NULL"),
    ("is_distributed", "INTEGER"),
];
const STACK_COLUMNS: [(&str, &str); 2] = [("id", "TEXT PRIMARY KEY"), ("stack_info", "TEXT")];
const CONFIG_COLUMNS: [(&str, &str); 9] = [
    ("id", "TEXT PRIMARY KEY"),
    ("graph_type", "TEXT NOT NULL"),
    ("task", "TEXT"),
    ("tool_tip", "TEXT"),
    ("micro_steps", "INTEGER"),
    ("overflow_check", "INTEGER"),
    ("node_colors", "TEXT NOT NULL"),
    ("rank_list", "TEXT NOT NULL"),
    ("step_list", "TEXT NOT NULL"),
];
/// msprobe's `add_table_index`, in its order.
const INDEXES: [(&str, &[&str]); 7] = [
    (
        "index1",
        &["step", "rank", "data_source", "up_node", "node_order"],
    ),
    ("index2", &["step", "rank", "data_source", "node_name"]),
    ("index3", &["step", "rank", "data_source", "node_order"]),
    ("index4", &["step", "rank", "node_order"]),
    ("index5", &["step", "rank", "micro_step_id", "node_order"]),
    ("index6", &["step", "rank", "modified", "matched_node_link"]),
    ("index7", &["is_distributed"]),
];

fn table(name: &str, columns: &[(&str, &str)]) -> Table {
    let body: Vec<String> = columns
        .iter()
        .map(|(c, decl)| format!("    {c} {decl}"))
        .collect();
    Table {
        name: name.into(),
        sql: format!("CREATE TABLE {name} (\n{}\n)", body.join(",\n")),
        columns: columns.len(),
        primary_key: columns.iter().position(|(_, d)| d.contains("PRIMARY KEY")),
    }
}

/// The tables (`tb_nodes`, `tb_stack`, `tb_config`, numbered [`TB_NODES`] …) and indexes.
pub fn schema() -> (Vec<Table>, Vec<Index>) {
    let tables = vec![
        table("tb_nodes", &NODE_COLUMNS),
        table("tb_stack", &STACK_COLUMNS),
        table("tb_config", &CONFIG_COLUMNS),
    ];
    let indexes = INDEXES
        .iter()
        .map(|(name, cols)| Index {
            name: (*name).into(),
            table: TB_NODES,
            sql: format!("CREATE INDEX {name} ON tb_nodes ({})", cols.join(", ")),
            columns: cols
                .iter()
                .filter_map(|c| NODE_COLUMNS.iter().position(|(n, _)| n == c))
                .collect(),
        })
        .collect();
    (tables, indexes)
}

fn opt(s: Option<&str>) -> Value<'_> {
    s.map_or(Value::Null, Value::Text)
}

/// A `tb_nodes` row's values, in column order. `precision_index` is stored as SQLite's INTEGER
/// affinity stores msprobe's floats: whole values as integers, 0.5 as a real.
pub fn node_values<S: AsRef<str>>(r: &NodeRow<S>) -> [Value<'_>; 22] {
    let precision = match r.precision_index {
        None => Value::Null,
        Some(p) if p.fract() == 0.0 && p.abs() < 9.0e18 => Value::Int(p as i64),
        Some(p) => Value::Real(p),
    };
    [
        Value::Text(r.id.as_ref()),
        Value::Text(r.graph_id.as_ref()),
        Value::Int(r.node_order),
        Value::Text(r.node_name.as_ref()),
        Value::Text(r.node_type.as_ref()),
        Value::Text(r.up_node.as_ref()),
        Value::Text(r.sub_nodes.as_ref()),
        precision,
        opt(r.overflow_level),
        Value::Int(r.micro_step_id),
        Value::Text(r.matched_node_link.as_ref()),
        Value::Text(r.stack_id.as_ref()),
        Value::Text(r.parallel_merge_info.as_ref()),
        Value::Text(r.matched_distributed.as_ref()),
        Value::Int(r.modified),
        Value::Text(r.input_data.as_ref()),
        Value::Text(r.output_data.as_ref()),
        Value::Text(r.data_source),
        opt(r.dump_data_dir.as_ref().map(AsRef::as_ref)),
        Value::Int(r.step),
        Value::Int(r.rank),
        Value::Int(r.is_distributed),
    ]
}

/// A `tb_stack` row's values.
pub fn stack_values(r: &StackRow) -> [Value<'_>; 2] {
    [Value::Text(&r.id), Value::Text(&r.stack_info)]
}

/// The `tb_config` row's values (its id is always "1").
pub fn config_values(c: &ConfigRow) -> [Value<'_>; 9] {
    [
        Value::Text("1"),
        Value::Text(c.graph_type),
        Value::Text(c.task),
        opt(c.tool_tip.as_deref()),
        Value::Int(c.micro_steps),
        Value::Int(c.overflow_check),
        Value::Text(&c.node_colors),
        Value::Text(&c.rank_list),
        Value::Text(&c.step_list),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_column_is_a_column() {
        let (_, indexes) = schema();
        for (ix, (_, cols)) in indexes.iter().zip(INDEXES) {
            assert_eq!(ix.columns.len(), cols.len(), "{}", ix.name);
        }
    }

    #[test]
    fn schema_text_is_msprobes() {
        let (tables, indexes) = schema();
        assert_eq!(
            tables[TB_STACK].sql,
            "CREATE TABLE tb_stack (\n    id TEXT PRIMARY KEY,\n    stack_info TEXT\n)"
        );
        assert_eq!(tables[TB_NODES].primary_key, Some(0));
        assert_eq!(
            indexes[0].sql,
            "CREATE INDEX index1 ON tb_nodes (step, rank, data_source, up_node, node_order)"
        );
        assert_eq!(indexes[0].columns, [19, 20, 17, 5, 2]);
        assert_eq!(indexes[6].columns, [21]);
    }
}
